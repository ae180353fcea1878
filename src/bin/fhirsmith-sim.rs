//! `fhirsmith-sim`: the simulated FHIRsmith server (see `fhircluster::sim`).

fn main() -> std::process::ExitCode {
    fhircluster::sim::run::main()
}
