//! The SVG plots of a run (plotters' SVG backend): recall over time,
//! search latency CDF, messages per search (CDF) and convergence (share of
//! live nodes that hold a published record or a tombstone, over time).

use std::path::Path;

use plotters::prelude::*;

use crate::report::{recall_of, Series as Run};

type Series = Vec<(f64, f64)>;

/// The empirical CDF, at most about 2,000 points (the SVGs stay small).
fn cdf(values: &[f64]) -> Series {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let step = n.div_ceil(2000).max(1);
    let mut out: Series = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if let Some(&last) = v.last() {
        out.push((last, 1.0));
    }
    out
}

/// Mean recall per time bin (about 50 bins from the first search to the
/// last: a swarm's searches start after its bootstrap).
fn recall_over_time(o: &Run<'_>) -> Series {
    let (Some(start), Some(end)) = (
        o.searches.iter().map(|r| r.at_s).reduce(f64::min),
        o.searches.iter().map(|r| r.at_s).reduce(f64::max),
    ) else {
        return Vec::new();
    };
    let bins = 50usize;
    let width = ((end - start) / bins as f64).max(1e-9);
    let mut sum = vec![(0.0, 0usize); bins + 1];
    for r in o.searches {
        let b = (((r.at_s - start) / width) as usize).min(bins);
        sum[b].0 += recall_of(&r.sample);
        sum[b].1 += 1;
    }
    sum.iter()
        .enumerate()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(i, (s, n))| (start + (i as f64 + 0.5) * width, s / *n as f64))
        .collect()
}

fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Series, RGBColor)],
    y_range: Option<(f64, f64)>,
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let all = series.iter().flat_map(|(_, s, _)| s.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if (x1 - x0).abs() < 1e-9 {
        x1 = x0 + 1.0;
    }
    let (y0, y1) = y_range.unwrap_or((y0.min(0.0), if y1 > y0 { y1 * 1.05 } else { y0 + 1.0 }));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()?;
    for (name, s, color) in series {
        let color = *color;
        chart
            .draw_series(LineSeries::new(s.iter().copied(), color.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Writes the four plots of a run into `dir` (the latency CDF without
/// the plain lookups' curve when the engine ran none).
///
/// # Errors
/// When a plot cannot be drawn or written.
pub fn write_plots(dir: &Path, name: &str, o: &Run<'_>) -> anyhow::Result<()> {
    line_chart(
        &dir.join("recall_over_time.svg"),
        &format!("{name}: recall over time"),
        o.clock,
        "mean recall",
        &[("recall", recall_over_time(o), BLUE)],
        Some((0.0, 1.05)),
    )?;
    let latencies: Vec<f64> = o.searches.iter().map(|r| r.sample.latency_ms).collect();
    let mut curves = vec![("search", cdf(&latencies), BLUE)];
    if let Some(lookups) = o.lookups {
        let closest: Vec<f64> = lookups.iter().filter_map(|l| l.closest_ms).collect();
        curves.push(("Kademlia lookup to closest node", cdf(&closest), RED));
    }
    line_chart(
        &dir.join("latency_cdf.svg"),
        &format!("{name}: latency CDF"),
        "ms",
        "share",
        &curves,
        Some((0.0, 1.0)),
    )?;
    let messages: Vec<f64> = o
        .searches
        .iter()
        .map(|r| f64::from(r.sample.messages))
        .collect();
    line_chart(
        &dir.join("messages_per_search.svg"),
        &format!("{name}: messages per search (CDF)"),
        "messages",
        "share",
        &[("messages", cdf(&messages), BLUE)],
        Some((0.0, 1.0)),
    )?;
    line_chart(
        &dir.join("convergence.svg"),
        &format!("{name}: convergence"),
        "ms after publication",
        "share of live nodes reached",
        &[
            ("published record", cdf(o.propagation_ms), BLUE),
            ("tombstone", cdf(o.revocation_ms), RED),
        ],
        Some((0.0, 1.0)),
    )?;
    Ok(())
}
