//! AID and DNS-AID, what a domain's DNS answers: the first byte picks
//! - 0..=63: TXT strings, one a line, read as `_agent` (AID's `select`,
//!   then each record `aid::parse`d and mapped to a descriptor);
//! - 64..=127: TXT strings read as the DNS-AID index (`_index._agents`);
//! - 128..: the RDATA of an SVCB record (wire format, as a DNS server
//!   sends it), decoded by hickory and read as a DNS-AID agent at
//!   `_mcp._agents` and as the index host record.
#![no_main]

use agentmesh::formats::{aid, dns_aid};
use agentmesh_fuzz::{lines, selector};
use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecoder, Restrict};
use libfuzzer_sys::fuzz_target;

const DOMAIN: &str = "fuzz.example";

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = selector(data) else {
        return;
    };
    match mode {
        0..=63 => {
            let records = lines(rest);
            if let Some(Ok(record)) = aid::select(&records) {
                let _ = record.to_descriptor(DOMAIN);
            }
            for r in records.iter().filter(|r| aid::is_aid(r)) {
                if let Ok(record) = aid::parse(r) {
                    let _ = record.to_descriptor(DOMAIN);
                }
            }
        }
        64..=127 => {
            if let Ok(agents) = dns_aid::parse_index(&lines(rest)) {
                for agent in agents {
                    let _ = dns_aid::agent_names(&agent.name, &agent.proto, DOMAIN);
                }
            }
        }
        _ => {
            let Ok(len) = u16::try_from(rest.len()) else {
                return;
            };
            let mut decoder = BinDecoder::new(rest);
            let Ok(RData::SVCB(svcb)) =
                RData::read(&mut decoder, RecordType::SVCB, Restrict::new(len))
            else {
                return;
            };
            let owner = format!("_mcp.{}.{DOMAIN}", dns_aid::AGENTS_LABEL);
            if let Ok(dns_aid::Binding::Service(agent)) = dns_aid::from_svcb(&owner, &svcb) {
                let _ = (
                    agent.endpoint(),
                    agent.well_known_url(),
                    agent.to_descriptor(),
                );
            }
            if let Ok(dns_aid::Binding::Service(host)) =
                dns_aid::index_from_svcb(&dns_aid::index_name(DOMAIN), &svcb)
            {
                let _ = host.urls();
            }
        }
    }
});
