//! The resource paths of C2SP tlog-tiles, below the log's prefix:
//! `tile/<L>/<N>[.p/<W>]` for hash tiles and `tile/entries/<N>[.p/<W>]`
//! for entry bundles, `<N>` in zero-padded 3-digit elements of which all
//! but the last begin with `x`. Only the canonical spelling parses: a
//! path that would print differently (a leading zero in `<L>` or `<W>`,
//! a full width spelled `.p/256`) is refused.

use std::fmt;

/// Hashes (or entries) in a full tile.
pub const TILE_WIDTH: u32 = 256;

/// The longest path accepted: `entries/` and a `u64` index in seven
/// elements with a partial width are well under it.
const MAX_PATH_BYTES: usize = 64;

/// A tile of the log, as its path names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePath {
    /// `None` for an entry bundle, else the tile's level (0..=63).
    pub level: Option<u8>,
    /// The tile's index within its level.
    pub index: u64,
    /// Its width: [`TILE_WIDTH`] for a full tile, 1..=255 for a partial one.
    pub width: u32,
}

impl TilePath {
    /// Parses a path below `tile/` (`0/x001/234.p/7`, `entries/000`).
    ///
    /// # Errors
    /// A message naming what is wrong with it.
    pub fn parse(path: &str) -> Result<Self, String> {
        if path.len() > MAX_PATH_BYTES {
            return Err(format!("a tile path is at most {MAX_PATH_BYTES} bytes"));
        }
        let (level, rest) = path
            .split_once('/')
            .ok_or_else(|| "a tile path is <level>/<index> or entries/<index>".to_owned())?;
        let level = match level {
            "entries" => None,
            l => Some(
                l.parse::<u8>()
                    .ok()
                    .filter(|l| *l <= 63)
                    .ok_or_else(|| format!("tile level {l:?} is not 0 to 63"))?,
            ),
        };
        let (digits, width) = match rest.split_once(".p/") {
            Some((digits, w)) => (
                digits,
                w.parse::<u32>()
                    .ok()
                    .filter(|w| (1..TILE_WIDTH).contains(w))
                    .ok_or_else(|| format!("partial width {w:?} is not 1 to 255"))?,
            ),
            None => (rest, TILE_WIDTH),
        };
        let mut index: u64 = 0;
        let elements: Vec<&str> = digits.split('/').collect();
        for (i, element) in elements.iter().enumerate() {
            let last = i + 1 == elements.len();
            let three = if last {
                Some(*element)
            } else {
                element.strip_prefix('x')
            };
            let value = three
                .filter(|d| d.len() == 3 && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
                .ok_or_else(|| {
                    format!("tile index element {element:?} is not xNNN or a last NNN")
                })?;
            index = index
                .checked_mul(1000)
                .and_then(|i| i.checked_add(value))
                .ok_or_else(|| "tile index overflows".to_owned())?;
        }
        let tile = Self {
            level,
            index,
            width,
        };
        if tile.to_string() != path {
            return Err(format!("tile path {path:?} is not in canonical form"));
        }
        Ok(tile)
    }

    /// Whether it is a full tile.
    pub fn is_full(&self) -> bool {
        self.width == TILE_WIDTH
    }

    /// The first entry (for level 0 and bundles) or subtree the tile
    /// holds, at its level.
    pub fn first(&self) -> u64 {
        self.index * u64::from(TILE_WIDTH)
    }
}

impl fmt::Display for TilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Some(l) => write!(f, "{l}/")?,
            None => f.write_str("entries/")?,
        }
        let mut groups = vec![self.index % 1000];
        let mut rest = self.index / 1000;
        while rest > 0 {
            groups.push(rest % 1000);
            rest /= 1000;
        }
        for (i, g) in groups.iter().rev().enumerate() {
            if i + 1 < groups.len() {
                write!(f, "x{g:03}/")?;
            } else {
                write!(f, "{g:03}")?;
            }
        }
        if !self.is_full() {
            write!(f, ".p/{}", self.width)?;
        }
        Ok(())
    }
}
