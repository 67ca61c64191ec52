//! The `data` of the events of a `text/event-stream` body: what the
//! gateway's MCP client and the liveness probe both read JSON-RPC answers
//! from.

/// The data of each event of a `text/event-stream`, as the HTML
/// standard's parser reads it: a line ends with CRLF, LF or CR (servers
/// use each), a blank line ends an event, an event's `data` lines are
/// joined with LF, comments (`:`) and other fields are skipped. An event
/// the stream's end cuts off is kept (the answer read is whole).
pub fn event_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    let mut rest = text;
    loop {
        let (line, next) = match rest.find(['\r', '\n']) {
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..i], Some(&rest[i + skip..]))
            }
            None => (rest, None),
        };
        if line.is_empty() {
            events.extend(data.take());
        } else if !line.starts_with(':') {
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            if name == "data" {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                }
            }
        }
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    events.extend(data);
    events
}
