package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/scenarios"
)

// maxDepth bounds --depth: at 4 the two-agent alphabet already gives
// about 50,000 workloads, far past the release budget.
const maxDepth = 4

// generatedFlags defines the flags of the generated workloads.
func generatedFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.generated, "generated", false, "sweep the generated workloads (every sequence of up to --depth ops by --agents agents) instead of the scenario files")
	fs.IntVar(&o.depth, "depth", 3, "with --generated: the most ops in a workload (1-4)")
	fs.IntVar(&o.agents, "agents", 3, "with --generated (and --sample): how many agents (1-3)")
	fs.IntVar(&o.sample, "sample", 4, "--quick and --self-test add this many generated workloads of --depth ops, drawn with --seed (0: none)")
}

// checkGenerated rejects generated-workload flags that make no sense.
func checkGenerated(o *options) error {
	if !o.generated && (o.set["depth"] || o.set["agents"]) {
		return usagef("--depth and --agents need --generated")
	}
	if o.depth < 1 || o.depth > maxDepth {
		return usagef("--depth %d: want 1 to %d", o.depth, maxDepth)
	}
	if o.agents < 1 || o.agents > 3 {
		return usagef("--agents %d: want 1 to 3", o.agents)
	}
	if o.sample < 0 {
		return usagef("--sample %d must not be negative", o.sample)
	}
	if o.generated && o.scenarioDir != "" {
		return usagef("give --generated or --scenarios, not both")
	}
	return nil
}

// generatedScenarios returns the generated workloads --scenario selects.
// A workload's full name (gen-OP-OP-...) is built directly, whatever
// --depth and --agents say, so a reproduction line needs no enumeration.
func generatedScenarios(o *options) ([]*scenarios.Scenario, error) {
	if !strings.ContainsAny(o.scenario, "*?[") {
		w, err := crashsweep.ParseWorkload(o.scenario)
		if err != nil {
			return nil, err
		}
		sc, err := w.Scenario()
		if err != nil {
			return nil, err
		}
		return []*scenarios.Scenario{sc}, nil
	}
	all, st, err := crashsweep.Generated(o.depth, o.agents)
	if err != nil {
		return nil, err
	}
	o.genStats = &st
	sel, err := scenarios.Select(all, o.scenario)
	if err != nil {
		return nil, err
	}
	// --shard splits the workloads, not the tasks: each job then makes
	// only its own workloads' reference runs.
	shard, shards, err := parseShard(o.shard)
	if err != nil {
		return nil, err
	}
	var mine []*scenarios.Scenario
	for i, sc := range sel {
		if i%shards == shard {
			mine = append(mine, sc)
		}
	}
	if len(mine) == 0 {
		return nil, usagef("--shard %s: no workload falls in it (%d selected)", o.shard, len(sel))
	}
	return mine, nil
}

// addSample adds --sample generated workloads to the scenarios of --quick
// and --self-test, unless a scenario glob, a scenario directory or
// --generated chose the scenarios, and prints which and with what seed.
func addSample(scs []*scenarios.Scenario, o *options, stdout io.Writer) ([]*scenarios.Scenario, error) {
	if !(o.quick || o.selfTest) || o.generated || o.scenarioDir != "" || o.set["scenario"] || o.sample == 0 {
		return scs, nil
	}
	gen, err := crashsweep.SampleGenerated(o.depth, o.agents, o.sample, uint64(o.seed))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(gen))
	for i, sc := range gen {
		names[i] = sc.Name
	}
	fmt.Fprintf(stdout, "generated sample (--sample %d --depth %d --agents %d --seed %d): %s\n",
		o.sample, o.depth, o.agents, o.seed, strings.Join(names, " "))
	return append(scs, gen...), nil
}

// addCanaryWorkloads adds crashsweep.CanaryWorkloads to the scenarios of
// --self-test, unless a scenario glob, a scenario directory or
// --generated chose the scenarios.
func addCanaryWorkloads(scs []*scenarios.Scenario, o *options) ([]*scenarios.Scenario, error) {
	if !o.selfTest || o.generated || o.scenarioDir != "" || o.set["scenario"] {
		return scs, nil
	}
	for _, name := range crashsweep.CanaryWorkloads {
		w, err := crashsweep.ParseWorkload(name)
		if err != nil {
			return nil, err
		}
		sc, err := w.Scenario()
		if err != nil {
			return nil, err
		}
		scs = append(scs, sc)
	}
	return scs, nil
}

// generatedSummary is the line --generated prints before the summary:
// workloads × points × models, what the enumeration left out, and the
// time.
func generatedSummary(rep *crashsweep.Report, o *options) string {
	// A workload named in full is built alone: no enumeration to describe.
	what, enum := "workload "+o.scenario, ""
	if st := o.genStats; st != nil {
		what = fmt.Sprintf("depth %d, %d agents", o.depth, o.agents)
		enum = fmt.Sprintf(" (of %d sequences: %d agent renamings and %d that cannot run left out)",
			st.Sequences, st.Mirrors, st.Infeasible+st.Ambiguous)
	}
	shard := ""
	if o.shard != "" {
		shard = ", shard " + o.shard
	}
	return fmt.Sprintf("crashsim --generated: %s%s: %d workloads%s, %d crash points in all, %d models: %d states checked in %.1f s",
		what, shard, len(rep.Scenarios), enum, rep.Points, len(rep.Models), rep.States, rep.Elapsed.Seconds())
}
