//! Churn during the search phase: the run's outages as a timeline of
//! stops and starts, with the probes on the same timeline ([`Churning`]).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::agents::{agent_id, document, probe_id};
use super::measure::Truth;
use super::node::Swarm;
use super::outcome::SwarmOutcome;
use super::phases::ready;
use super::watch::{is_descriptor, is_tombstone, probe_deadline, push_arrivals, Arrival, Probe};
use crate::model::SwarmParams;

/// A step of a churning run's timeline. The derived order puts, at one
/// instant, the starts before the stops and both before the probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Start(usize),
    Stop(usize),
    /// Publish probe `j` ([`SwarmParams::publish_probes`]).
    Publish(usize),
    /// Tombstone the revoke probes.
    Revoke,
}

/// A probe's [`watch`], spawned.
type Watching = tokio::task::JoinHandle<Result<Vec<Option<Arrival>>>>;

/// The churn of a run: its outages as a timeline of stops and starts,
/// with the probes on the same timeline, played as the search phase
/// reaches them. The loop that runs the searches plays them between two
/// searches, so a step can come up to one search (at most its budget)
/// late, and a start that takes long delays the next search by as much.
pub(super) struct Churning {
    /// Sorted by time, then by [`Step`]'s order, then by node.
    steps: Vec<(Duration, Step)>,
    next: usize,
    /// When the search phase began.
    t0: Instant,
    rng: StdRng,
    restarts: usize,
    /// Revoked agents whose home was down at the revocation's time: each
    /// is tombstoned when its home starts again.
    deferred: Vec<usize>,
    deferred_total: usize,
    /// The probes' watches, running.
    watches: Vec<(Probe, String, Watching)>,
}

impl Churning {
    /// No churn, no steps: without outages the probes run after the
    /// searches instead.
    pub(super) fn new(params: &SwarmParams) -> Self {
        let mut steps: Vec<(Duration, Step)> = params
            .outages
            .iter()
            .flat_map(|o| {
                [
                    (o.down_at, Step::Stop(o.node)),
                    (o.up_at, Step::Start(o.node)),
                ]
            })
            .collect();
        if !steps.is_empty() {
            steps.extend(
                params
                    .publish_at
                    .iter()
                    .enumerate()
                    .map(|(j, &at)| (at, Step::Publish(j))),
            );
            if params.revoke_probes > 0 {
                steps.push((params.revoke_at, Step::Revoke));
            }
        }
        steps.sort();
        Self {
            steps,
            next: 0,
            t0: Instant::now(),
            rng: StdRng::seed_from_u64(params.seed ^ 0xC4_0257),
            restarts: 0,
            deferred: Vec::new(),
            deferred_total: 0,
            watches: Vec::new(),
        }
    }

    pub(super) fn on(&self) -> bool {
        !self.steps.is_empty()
    }

    /// When the last probe is played, from the start of the search phase.
    fn last_probe(&self) -> Option<Duration> {
        self.steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Publish(_) | Step::Revoke))
            .map(|&(at, _)| at)
            .max()
    }

    /// Plays the steps due before `at` (from the start of the search
    /// phase), each at its time, then waits until `at`.
    pub(super) async fn until(
        &mut self,
        swarm: &mut Swarm,
        at: Duration,
        params: &SwarmParams,
        truth: &mut Truth,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let before = self.next;
        while let Some(&(when, step)) = self.steps.get(self.next) {
            if when > at {
                break;
            }
            tokio::time::sleep_until((self.t0 + when).into()).await;
            self.next += 1;
            self.play(swarm, step, params, truth, progress).await?;
        }
        tokio::time::sleep_until((self.t0 + at).into()).await;
        // A line each time another 50 have been played.
        if self.next / 50 > before / 50 {
            let down = (0..swarm.nodes.len()).filter(|&i| swarm.is_down(i)).count();
            progress(&format!(
                "churn: {} of {} stops, starts and probes played, {down} nodes down",
                self.next,
                self.steps.len()
            ));
        }
        Ok(())
    }

    async fn play(
        &mut self,
        swarm: &mut Swarm,
        step: Step,
        params: &SwarmParams,
        truth: &mut Truth,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        match step {
            Step::Stop(node) => swarm.stop(node).await?,
            Step::Start(node) => {
                self.start(swarm, node, params).await?;
                let (now, later): (Vec<usize>, Vec<usize>) = self
                    .deferred
                    .iter()
                    .partition(|&&i| params.agents[i].home == node);
                self.deferred = later;
                for i in now {
                    self.revoke(swarm, i, params, truth).await?;
                }
            }
            Step::Publish(j) => {
                let probe = &params.publish_probes[j];
                let id = probe_id(j);
                let doc = document(params.agents.len() + j, &id, &probe.capabilities);
                let origin = swarm.live_from(probe.home);
                let t0 = Instant::now();
                swarm.nodes[origin]
                    .registry
                    .register(doc)
                    .await
                    .with_context(|| format!("publishing probe {id} at node {origin}"))?;
                truth.add(&id, &probe.capabilities);
                let watch = swarm.watch(&id, t0, probe_deadline(params.nodes), is_descriptor);
                self.watches
                    .push((Probe::Publish, id.clone(), tokio::spawn(watch)));
                progress(&format!("published {id} at node {origin}"));
            }
            Step::Revoke => {
                for i in 0..params.revoke_probes {
                    if swarm.is_down(params.agents[i].home) {
                        self.deferred.push(i);
                        self.deferred_total += 1;
                    } else {
                        self.revoke(swarm, i, params, truth).await?;
                    }
                }
                progress(&format!(
                    "revoked {} agents, {} more when their homes start again",
                    params.revoke_probes - self.deferred.len(),
                    self.deferred.len()
                ));
            }
        }
        Ok(())
    }

    async fn start(&mut self, swarm: &mut Swarm, node: usize, params: &SwarmParams) -> Result<()> {
        swarm.restart(node, params, &mut self.rng).await?;
        self.restarts += 1;
        Ok(())
    }

    /// Tombstones agent `i` at its home (live) and watches the tombstone.
    async fn revoke(
        &mut self,
        swarm: &Swarm,
        i: usize,
        params: &SwarmParams,
        truth: &mut Truth,
    ) -> Result<()> {
        let agent = &params.agents[i];
        let id = agent_id(i);
        let t0 = Instant::now();
        swarm.nodes[agent.home]
            .registry
            .delete(&id)
            .await
            .with_context(|| format!("revoking {id}"))?;
        truth.revoke(&id, &agent.capabilities);
        let watch = swarm.watch(&id, t0, probe_deadline(params.nodes), is_tombstone);
        self.watches.push((Probe::Revoke, id, tokio::spawn(watch)));
        Ok(())
    }

    /// The search phase is over: the churn goes on until every probe has
    /// been played and its watch has ended (or the last one's deadline);
    /// then the nodes still down start again (their later stops are not
    /// played), the run waits until every node has its peers, plays the
    /// revocations still waiting for their homes (not at each home's
    /// start: a tombstone timed while a third of the swarm starts at once
    /// would time that mass restart, which real churn does not have), and
    /// waits until every probe's watch has ended. The
    /// restarts, the probes' arrivals and the deferred revocations go to
    /// `out`.
    pub(super) async fn end(
        mut self,
        swarm: &mut Swarm,
        params: &SwarmParams,
        truth: &mut Truth,
        out: &mut SwarmOutcome,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        if let Some(last) = self.last_probe() {
            // Every probe step not played yet (the searches may have run
            // past them), then second by second until every watch has
            // ended, or the last probe's deadline.
            self.until(swarm, last, params, truth, progress).await?;
            let until = last + probe_deadline(params.nodes);
            let mut at = self.t0.elapsed();
            while at < until && self.watches.iter().any(|(_, _, w)| !w.is_finished()) {
                at = (at + Duration::from_secs(1)).min(until);
                self.until(swarm, at, params, truth, progress).await?;
            }
        }
        let down: Vec<usize> = (0..swarm.nodes.len())
            .filter(|&i| swarm.is_down(i))
            .collect();
        for &i in &down {
            self.start(swarm, i, params).await?;
        }
        progress(&format!(
            "churn over: {} restarts, the {} nodes still down started again",
            self.restarts,
            down.len()
        ));
        let deadline = Duration::from_secs(60) + Duration::from_millis(300) * down.len() as u32;
        ready(&swarm.nodes, deadline, progress).await?;
        for i in std::mem::take(&mut self.deferred) {
            self.revoke(swarm, i, params, truth).await?;
        }
        for (probe, id, watch) in self.watches {
            let arrivals = watch.await.context("a probe's watch")??;
            push_arrivals(out, probe, &arrivals, &id, progress);
        }
        out.restarts = self.restarts;
        out.revocations_deferred = self.deferred_total;
        Ok(())
    }
}
