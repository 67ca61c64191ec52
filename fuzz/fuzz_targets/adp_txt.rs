//! The `_agent` TXT record of ADP (`adp::txt::parse`), as the crawler
//! reads a domain's answer: the input is the TXT strings, one a line (each
//! already joined and made UTF-8, as `crawl::dns` hands them over).
#![no_main]

use agentmesh::adp::txt;
use agentmesh_fuzz::lines;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let records = lines(data);
    if let Ok(parsed) = txt::parse("fuzz.example", &records) {
        // What parsed renders to a record that parses to the same pair.
        let again = txt::parse(
            "fuzz.example",
            &[txt::render(&parsed.fingerprint, &parsed.well_known)],
        )
        .expect("a rendered record parses");
        assert_eq!(again.fingerprint, parsed.fingerprint);
    }
});
