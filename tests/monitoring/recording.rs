//! Series recorded from a real launcher as Prometheus would store them: each scrape's samples
//! with the target's `job` and `instance`, `up` for every scrape (0 when it failed), and a
//! series that goes missing marked `stale`, as Prometheus marks it, in promtool's notation.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;

/// One recorded series: its name and labels.
pub(super) type Key = (String, BTreeMap<String, String>);

/// The job the rules ask for (README's scrape config names it so).
pub(super) const JOB: &str = "fhircluster";

/// One scrape as Prometheus stores it: the target's samples with `job` and `instance` added,
/// or None when the scrape failed (the target down: `up` 0, no samples).
pub(super) type Scrape = Option<Exposition>;

/// The recorded values of every series of `families` by scrape (None: absent in that one),
/// labelled as Prometheus labels a target's series, and `up` for each scrape.
pub(super) fn series(
    scrapes: &[Scrape],
    families: &[&str],
    instance: &str,
) -> BTreeMap<Key, Vec<Option<f64>>> {
    let target = |mut l: BTreeMap<String, String>| {
        l.insert("job".into(), JOB.into());
        l.insert("instance".into(), instance.into());
        l
    };
    let mut all: BTreeMap<Key, Vec<Option<f64>>> = BTreeMap::new();
    let up = all
        .entry(("up".into(), target(BTreeMap::new())))
        .or_insert_with(|| vec![None; scrapes.len()]);
    for (i, m) in scrapes.iter().enumerate() {
        up[i] = Some(if m.is_some() { 1.0 } else { 0.0 });
    }
    for (i, m) in scrapes.iter().enumerate() {
        let Some(m) = m else { continue };
        for fam in families {
            let Some(f) = m.families.get(*fam) else {
                continue;
            };
            for s in &f.samples {
                let v = all
                    .entry((s.name.clone(), target(s.labels.clone())))
                    .or_insert_with(|| vec![None; scrapes.len()]);
                v[i] = Some(s.value);
            }
        }
    }
    all
}

pub(super) fn selector((name, labels): &Key) -> String {
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", l.join(","))
}

/// A series' values in promtool's notation. A sample missing after one that was there is
/// `stale`: Prometheus marks a series stale when a scrape lacks it or fails, so it is gone at
/// once rather than looked back to for five minutes; `_` before it ever was.
pub(super) fn promtool_values(values: &[Option<f64>]) -> String {
    let mut seen = false;
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        out.push(match v {
            Some(x) => {
                seen = true;
                format!("{x}")
            }
            None if seen && values[i - 1].is_some() => "stale".to_string(),
            None => "_".to_string(),
        });
    }
    out.join(" ")
}

pub(super) fn at(values: &[Option<f64>], t: usize) -> Option<f64> {
    values.get(t).copied().flatten()
}

/// Scrapes once: None when nothing answers. While the launcher is being stopped a scrape may
/// also be cut off midway: that is a failed scrape too, as Prometheus counts it.
pub(super) fn try_scrape(admin: u16, stopping: bool) -> Scrape {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    if stopping {
        std::panic::catch_unwind(|| scrape(admin)).ok()
    } else {
        Some(scrape(admin))
    }
}
