//! `agentmesh-sim`: the population simulator. It grows with the mesh issue;
//! for now it only reports which scenarios exist.

fn main() {
    println!(
        "agentmesh-sim {}: no scenarios yet (they arrive with the mesh)",
        env!("CARGO_PKG_VERSION")
    );
}
