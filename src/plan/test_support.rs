//! What the plan's tests share: settings with a fixed data directory and a CPU sizing.

use std::path::PathBuf;

use crate::settings::Settings;
use crate::sizing::{size_for, CpuInputs, CpuSizing};

pub fn settings() -> Settings {
    Settings {
        data_dir: PathBuf::from("/var/lib/fhirsmith"),
        ..Settings::default()
    }
}

pub fn sizing(s: &Settings, vcpu: u32, cores: u32) -> CpuSizing {
    let inputs = CpuInputs {
        vcpu,
        detected_cores: Some(cores),
        quota: None,
    };
    size_for(s, &inputs).expect("a known rule")
}
