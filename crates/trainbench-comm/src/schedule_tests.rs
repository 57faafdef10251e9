//! Tests of the pipeline schedules: every action once, dependencies respected, 1F1B's memory bound, and no
//! deadlock under rendezvous sends.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use super::*;

const SCHEDULES: [PipelineSchedule; 3] =
    [PipelineSchedule::Gpipe, PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved1F1B];

/// Every shape tried: (schedule, p, m, v).
fn shapes() -> Vec<(PipelineSchedule, usize, usize, usize)> {
    let mut out = Vec::new();
    for schedule in SCHEDULES {
        for p in 1..=5 {
            for m in 1..=9 {
                let vs: &[usize] = if schedule == PipelineSchedule::Interleaved1F1B { &[1, 2, 3] } else { &[1] };
                for &v in vs {
                    if schedule == PipelineSchedule::Interleaved1F1B && m % p != 0 {
                        continue;
                    }
                    out.push((schedule, p, m, v));
                }
            }
        }
    }
    out
}

#[test]
fn every_pass_of_every_chunk_and_micro_batch_runs_once_on_its_rank() {
    for (schedule, p, m, v) in shapes() {
        let mut seen = HashSet::new();
        for s in 0..p {
            for a in stage_actions(schedule, p, s, m, v).unwrap() {
                assert_eq!(a.chunk % p, s, "{schedule:?} p{p} m{m} v{v}: {a:?} on rank {s}");
                assert!(seen.insert(a), "{schedule:?} p{p} m{m} v{v}: {a:?} twice");
            }
        }
        assert_eq!(seen.len(), 2 * m * p * v, "{schedule:?} p{p} m{m} v{v}");
    }
}

/// Runs every rank's steps together: a send is posted at once (it never blocks), a receive blocks until its
/// message was posted; each pass checks its dependencies. Returns the order passes ran in; panics on a deadlock
/// (every rank blocked in a receive).
fn simulate(schedule: PipelineSchedule, p: usize, m: usize, v: usize) -> Vec<Action> {
    let chunks = p * v;
    let steps: Vec<Vec<Step>> =
        (0..p).map(|s| stage_steps(&stage_actions(schedule, p, s, m, v).unwrap(), p, chunks)).collect();
    let mut at = vec![0usize; p];
    let mut posted: HashSet<(usize, Message)> = HashSet::new();
    let mut done: HashSet<Action> = HashSet::new();
    let mut order = Vec::new();
    loop {
        let mut progress = false;
        for s in 0..p {
            while let Some(step) = steps[s].get(at[s]) {
                match *step {
                    Step::Compute(a) => {
                        let ok = match a.pass {
                            Pass::Forward => a.chunk == 0 || done.contains(&Action { chunk: a.chunk - 1, ..a }),
                            Pass::Backward => {
                                done.contains(&Action { pass: Pass::Forward, ..a })
                                    && (a.chunk + 1 == chunks || done.contains(&Action { chunk: a.chunk + 1, ..a }))
                            }
                        };
                        assert!(ok, "{schedule:?} p{p} m{m} v{v}: {a:?} ran before its input");
                        done.insert(a);
                        order.push(a);
                    }
                    // Posted to `x.peer`, from `s`.
                    Step::Send(x) => assert!(posted.insert((x.peer, Message { peer: s, ..x }))),
                    Step::Recv(x) => {
                        if !posted.remove(&(s, x)) {
                            break;
                        }
                    }
                }
                at[s] += 1;
                progress = true;
            }
        }
        if (0..p).all(|s| at[s] == steps[s].len()) {
            assert!(posted.is_empty(), "{schedule:?} p{p} m{m} v{v}: messages never received: {posted:?}");
            return order;
        }
        let stuck: Vec<Option<&Step>> = (0..p).map(|s| steps[s].get(at[s])).collect();
        assert!(progress, "{schedule:?} p{p} m{m} v{v}: deadlock at {stuck:?}");
    }
}

#[test]
fn no_schedule_deadlocks_and_every_pass_waits_for_its_input() {
    for (schedule, p, m, v) in shapes() {
        let order = simulate(schedule, p, m, v);
        assert_eq!(order.len(), 2 * m * p * v, "{schedule:?} p{p} m{m} v{v}");
    }
}

#[test]
fn one_f_one_b_holds_at_most_p_micro_batches_and_gpipe_holds_all() {
    for p in 1..=5 {
        for m in 1..=9 {
            for s in 0..p {
                let f = stage_actions(PipelineSchedule::OneFOneB, p, s, m, 1).unwrap();
                assert_eq!(peak_in_flight(&f), (p - s).min(m), "1F1B p{p} m{m} stage {s}");
                let g = stage_actions(PipelineSchedule::Gpipe, p, s, m, 1).unwrap();
                assert_eq!(peak_in_flight(&g), m, "GPipe p{p} m{m} stage {s}");
            }
        }
    }
}

#[test]
fn interleaving_deals_chunks_round_robin_and_starts_with_the_megatron_warm_up() {
    // p 2, m 4, v 2, stage 0: chunks 0 and 2; warm-up (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards.
    let a = stage_actions(PipelineSchedule::Interleaved1F1B, 2, 0, 4, 2).unwrap();
    let f = |micro, chunk| Action { pass: Pass::Forward, micro, chunk };
    let b = |micro, chunk| Action { pass: Pass::Backward, micro, chunk };
    assert_eq!(a[..6], [f(0, 0), f(1, 0), f(0, 2), f(1, 2), f(2, 0), b(0, 2)]);
    assert_eq!(peak_in_flight(&a), 5);
    assert!(matches!(
        stage_actions(PipelineSchedule::Interleaved1F1B, 2, 0, 3, 2),
        Err(ScheduleError::Interleaving { stages: 2, microbatches: 3 })
    ));
    assert!(matches!(stage_actions(PipelineSchedule::OneFOneB, 2, 0, 4, 2), Err(ScheduleError::Virtual { .. })));
    assert!(matches!(stage_actions(PipelineSchedule::Gpipe, 2, 2, 4, 1), Err(ScheduleError::Shape { .. })));
}

#[test]
fn messages_of_one_step_have_distinct_tags() {
    let (p, m, v) = (2, 4, 2);
    let mut tags = HashSet::new();
    for s in 0..p {
        for step in stage_steps(&stage_actions(PipelineSchedule::Interleaved1F1B, p, s, m, v).unwrap(), p, p * v) {
            if let Step::Send(x) = step {
                assert!(tags.insert((s, x.tag(m))), "{x:?}");
            }
        }
    }
    assert_eq!(tags.len(), 2 * m * (p * v - 1));
}

#[test]
fn a_replay_of_equal_chunks_with_instant_messages_gives_the_formula() {
    // Forward 1 s, backward 2 s per stage of work, split evenly over its v chunks.
    for (schedule, p, m, v) in shapes() {
        let cost = |_: usize, pass: Pass| if pass == Pass::Forward { 1.0 / v as f64 } else { 2.0 / v as f64 };
        let r = replay(schedule, (p, m, v), &cost, 0.0).unwrap();
        let busy = 3.0 * m as f64;
        assert!(r.busy_s.iter().all(|b| (b - busy).abs() < 1e-9), "{schedule:?} p{p} m{m} v{v}: {:?}", r.busy_s);
        if schedule != PipelineSchedule::Interleaved1F1B || m >= p {
            let formula = (p as f64 - 1.0) / ((v * m) as f64 + p as f64 - 1.0);
            let span = busy + 3.0 * (p as f64 - 1.0) / v as f64;
            assert!((r.makespan_s - span).abs() < 1e-9, "{schedule:?} p{p} m{m} v{v}: {} vs {span}", r.makespan_s);
            assert!((r.bubble() - formula).abs() < 1e-9, "{schedule:?} p{p} m{m} v{v}: {} vs {formula}", r.bubble());
        }
    }
}

#[test]
fn a_heavy_last_chunk_and_slow_messages_widen_the_bubble() {
    // p 2, m 4, v 2: chunks 0 and 2 on rank 0, 1 and 3 on rank 1; the last chunk (a block and the head) costs
    // 2.4 blocks.
    let weight = |c: usize| if c == 3 { 2.4 } else { 1.0 };
    let cost = |c: usize, pass: Pass| weight(c) * if pass == Pass::Forward { 1.0 } else { 2.0 };
    let even = replay(PipelineSchedule::Interleaved1F1B, (2, 4, 2), &|_, pass| cost(0, pass), 0.0).unwrap();
    let heavy = replay(PipelineSchedule::Interleaved1F1B, (2, 4, 2), &cost, 0.0).unwrap();
    assert!((even.bubble() - 1.0 / 9.0).abs() < 1e-9);
    // Rank 1 computes 4 x 3 x 3.4 = 40.8 s, rank 0 24 s: rank 0 waits at least 40.8 - 24 of the step.
    assert!((heavy.busy_s[1] - 40.8).abs() < 1e-9 && (heavy.busy_s[0] - 24.0).abs() < 1e-9);
    assert!(heavy.makespan_s >= 40.8 && heavy.idle_shares()[0] >= 1.0 - 24.0 / heavy.makespan_s - 1e-12);
    assert!(heavy.bubble() > 0.2, "{}", heavy.bubble());
    let slow = replay(PipelineSchedule::Interleaved1F1B, (2, 4, 2), &cost, 0.5).unwrap();
    assert!(slow.makespan_s > heavy.makespan_s && slow.bubble() > heavy.bubble());
}
