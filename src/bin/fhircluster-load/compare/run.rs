//! The comparison's top: checks the limits, runs the parts chosen round after round (behind the
//! sims, then behind the fast upstream, each door in turn), then the curves, and writes the
//! tables (printed and `table.md`), every figure (`results.json`) and the charts.

use std::path::Path;

use anyhow::{bail, Context};
use serde_json::json;

use super::charts;
use super::clients::raise_fd_limit;
use super::cpu_list;
use super::curves::{self, Curves};
use super::fast::{self, FastRound};
use super::fast_rows;
use super::figures::{rows, Labels, Round};
use super::memory::fit_counts;
use super::round::{self, capacity};
use super::setup::{version, Setup, RAW_PATH};
use super::spread;
use super::table::markdown;
use super::upstream::BODY;
use super::{CompareArgs, Part};

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The most connections one wrk run opens.
fn most_connections(a: &CompareArgs) -> u32 {
    let mut all = vec![a.wrk_connections, a.threads_connections];
    all.extend(&a.fast_connections);
    all.extend(&a.curve_connections);
    all.into_iter().max().unwrap_or(0)
}

/// The tables and notes, as printed.
fn report(
    args: &CompareArgs,
    header: &str,
    rounds: &[Round],
    fast_rounds: &[FastRound],
    curves: Option<&Curves>,
    notes: &[String],
) -> String {
    let mut out = format!("{header}\n");
    if !rounds.is_empty() {
        let labels = Labels {
            wrk: format!(
                "GET {RAW_PATH}, wrk -t{} -c{} {} s",
                args.wrk_threads, args.wrk_connections, args.wrk_seconds
            ),
            multiple: args.multiple,
            fast_ms: 10.0,
        };
        out.push_str(&format!("\n{}", markdown(&rows(rounds, &labels))));
    }
    if !fast_rounds.is_empty() {
        out.push_str(&format!(
            "\nFast upstream (nginx, 1 worker, a {}-byte FHIR Parameters from memory; fhircluster \
             runs it as its only process), GET {RAW_PATH}, wrk {} s each after {} s of warm-up, \
             medians over the rounds ({}):\n\n{}",
            BODY.len(),
            args.wrk_seconds,
            args.warm_seconds,
            fast_rounds.len(),
            markdown(&fast_rows::rows(fast_rounds))
        ));
        out.push_str(&format!(
            "\nRound by round: each round's fhircluster ÷ the other door, their median, and 90% \
             of the medians of {} resamplings of the rounds; a target is met or missed only when \
             all of that spread is on one side of it:\n\n{}",
            super::table::group(spread::RESAMPLES as f64, 0),
            spread::markdown(fast_rounds)
        ));
    }
    if let Some(c) = curves {
        if !c.connections.is_empty() {
            out.push_str(&format!(
                "\nAgainst connections (fast upstream, wrk -t{}, one run each; 2xx/s · p99 · CPU \
                 per request, direct: the upstream's):\n\n{}",
                c.connections_wrk_threads,
                charts::curve_table(&c.connections, "connections")
            ));
        }
        if !c.threads.is_empty() {
            out.push_str(&format!(
                "\nAgainst each door's threads (fast upstream, wrk -t1 -c{}, {}; one run each):\n\n{}",
                c.threads_connections,
                pinned(c),
                charts::curve_table(&c.threads, "threads")
            ));
        }
    }
    for n in notes {
        out.push_str(&format!("\nNote: {n}\n"));
    }
    out
}

fn pinned(c: &Curves) -> String {
    let on = |what: &str, cpus: &Option<String>| match cpus {
        Some(list) => format!("{what} on CPU {list}"),
        None => format!("{what} not pinned"),
    };
    format!(
        "{}, {}",
        on("wrk", &c.pin_load),
        on("the upstream", &c.pin_upstream)
    )
}

/// The whole comparison; prints the tables and writes the JSON and the charts.
pub fn run(args: &CompareArgs, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    if args.rounds == 0 || args.rounds > 20 {
        bail!("--rounds must be 1 to 20");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpu_list(&args.pin_load, cpus).context("--pin-load")?;
    cpu_list(&args.pin_upstream, cpus).context("--pin-upstream")?;
    let limit = raise_fd_limit();
    // A proxy holds two descriptors a connection (the client's and the upstream's).
    let need = u64::from(most_connections(args)) * 2 + 200;
    if limit < need {
        bail!("the open-file limit is {limit}; {need} are needed for wrk's connections (raise the hard limit)");
    }
    let (idle, idle_note) = fit_counts(&args.idle_clients, limit);
    let (waiting, waiting_note) = fit_counts(&args.waiting, limit);
    let notes: Vec<String> = if args.runs(Part::Memory) {
        [
            idle_note.map(|n| format!("idle clients: {n}")),
            waiting_note.map(|n| format!("queued requests: {n}")),
        ]
        .into_iter()
        .flatten()
        .collect()
    } else {
        Vec::new()
    };
    for n in &notes {
        eprintln!("compare: {n}");
    }
    let setup = Setup::new(args, runtime)?;
    let versions = [
        version("nginx", "-v"),
        version("haproxy", "-v"),
        version("wrk", "-v"),
    ];
    let (mut rounds, mut fast_rounds) = (Vec::new(), Vec::new());
    for n in 0..args.rounds {
        if round::wanted(&setup) {
            rounds.push(round::one_round(&setup, n, &idle, &waiting)?);
        }
        if args.runs(Part::Fast) {
            fast_rounds.push(fast::one_round(&setup, n)?);
        }
    }
    let curves = if args.runs(Part::Curves) {
        Some(curves::run(&setup)?)
    } else {
        None
    };
    let surge = if args.runs(Part::Surge) {
        format!(
            "; heavy capacity {:.1}/s, surge {:.1}/s for {} s",
            capacity(&setup),
            args.multiple * capacity(&setup),
            args.surge_seconds
        )
    } else {
        String::new()
    };
    let rounds_run = if rounds.is_empty() && fast_rounds.is_empty() {
        String::new()
    } else {
        format!("rounds: {}, ", args.rounds)
    };
    let header = format!(
        "{rounds_run}{cpus} CPUs; {}; {}; {}; front doors on {} thread(s){surge}",
        versions[0], versions[1], versions[2], args.proxy_threads
    );
    let text = report(
        args,
        &header,
        &rounds,
        &fast_rounds,
        curves.as_ref(),
        &notes,
    );
    println!("{text}");
    write(&args.out_dir.join("table.md"), &text)?;
    let results = json!({
        "header": header,
        "versions": versions,
        "notes": notes,
        "rounds": rounds,
        "fast_rounds": fast_rounds,
        "curves": curves,
    });
    write(
        &args.out_dir.join("results.json"),
        &serde_json::to_string_pretty(&results)?,
    )?;

    let dir = &args.chart_dir;
    let title = format!(
        "$lookup probe during a {}× surge (1 master + {} workers, {cpus} cores)",
        args.multiple, args.workers
    );
    if let Some(svg) = charts::probe(&rounds, &title, args.surge_seconds) {
        write(&dir.join(charts::PROBE_SVG), &svg)?;
    }
    if let Some(svg) = charts::memory(&rounds) {
        write(&dir.join(charts::MEMORY_SVG), &svg)?;
    }
    if let Some(c) = &curves {
        if let Some((rps, p99)) = charts::connections(&c.connections, c.connections_wrk_threads) {
            write(&dir.join(charts::CONNECTIONS_THROUGHPUT_SVG), &rps)?;
            write(&dir.join(charts::CONNECTIONS_P99_SVG), &p99)?;
        }
        if let Some(svg) = charts::threads(&c.threads, c.threads_connections, &pinned(c)) {
            write(&dir.join(charts::THREADS_SVG), &svg)?;
        }
    }
    Ok(())
}
