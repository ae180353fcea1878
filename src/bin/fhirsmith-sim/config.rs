//! What the sim takes from `config.json`: the few settings a FHIRsmith process itself acts on
//! under the launcher. Pure: the parsed JSON (or none) and the role come in.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub port: Option<u16>,
    /// `server.cluster.bindAddress`, used with a role (127.0.0.1 unless set).
    pub bind_address: String,
    pub shared_cache: bool,
    pub shared_closure: bool,
    pub status_seconds: f64,
    /// The graph sampling interval this process uses (SIM-16).
    pub sample_seconds: f64,
    /// The tx endpoints' paths (`/r4` unless configured).
    pub endpoints: Vec<String>,
    pub instance_code: Option<String>,
}

impl SimConfig {
    pub fn from_json(json: Option<&Value>, has_role: bool) -> SimConfig {
        let null = Value::Null;
        let j = json.unwrap_or(&null);
        let cluster = &j["server"]["cluster"];
        let num = |v: &Value| v.as_f64().filter(|n| *n > 0.0);
        let interval_seconds = num(&j["stats"]["intervalMinutes"]).unwrap_or(10.0) * 60.0;
        let sample_seconds = match num(&j["stats"]["sampleSeconds"]) {
            Some(s) => s,
            None if has_role => interval_seconds.min(60.0),
            None => interval_seconds,
        };
        let mut endpoints: Vec<String> = j["modules"]["tx"]["endpoints"]
            .as_array()
            .map(|eps| {
                eps.iter()
                    .filter_map(|e| e["path"].as_str())
                    .map(|p| format!("/{}", p.trim_matches('/')))
                    .filter(|p| p.len() > 1)
                    .collect()
            })
            .unwrap_or_default();
        if endpoints.is_empty() {
            endpoints.push("/r4".to_string());
        }
        SimConfig {
            port: j["server"]["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok()),
            bind_address: cluster["bindAddress"]
                .as_str()
                .unwrap_or("127.0.0.1")
                .to_string(),
            shared_cache: cluster["sharedCache"].as_bool().unwrap_or(false),
            shared_closure: cluster["sharedClosure"].as_bool().unwrap_or(false),
            status_seconds: num(&cluster["statusSeconds"]).unwrap_or(15.0),
            sample_seconds,
            endpoints,
            instance_code: j["modules"]["tx"]["instanceCode"]
                .as_str()
                .map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_without_a_file() {
        let c = SimConfig::from_json(None, true);
        assert_eq!(c.bind_address, "127.0.0.1");
        assert_eq!(c.endpoints, ["/r4"]);
        assert_eq!((c.status_seconds, c.sample_seconds), (15.0, 60.0));
        assert!(!c.shared_cache && !c.shared_closure);
    }

    #[test]
    fn sample_interval_follows_the_spec() {
        // spec: SIM-16
        let c = |j: Value, role| SimConfig::from_json(Some(&j), role).sample_seconds;
        assert_eq!(c(json!({}), false), 600.0);
        assert_eq!(c(json!({"stats": {"intervalMinutes": 0.5}}), true), 30.0);
        assert_eq!(c(json!({"stats": {"intervalMinutes": 5}}), true), 60.0);
        assert_eq!(c(json!({"stats": {"sampleSeconds": 2}}), true), 2.0);
        assert_eq!(c(json!({"stats": {"sampleSeconds": 2}}), false), 2.0);
    }

    #[test]
    fn reads_the_settings_it_acts_on() {
        let j = json!({"server": {"port": 3100, "cluster": {"bindAddress": "0.0.0.0", "sharedCache": true, "sharedClosure": true, "statusSeconds": 1}},
            "modules": {"tx": {"instanceCode": "main", "endpoints": [{"path": "/r4"}, {"path": "r5/"}]}}});
        let c = SimConfig::from_json(Some(&j), true);
        assert_eq!(c.port, Some(3100));
        assert_eq!(c.bind_address, "0.0.0.0");
        assert!(c.shared_cache && c.shared_closure);
        assert_eq!(c.status_seconds, 1.0);
        assert_eq!(c.endpoints, ["/r4", "/r5"]);
        assert_eq!(c.instance_code.as_deref(), Some("main"));
    }
}
