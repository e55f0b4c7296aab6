package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/bench/engine"
)

// childArgs are the flags of a child process.
type childArgs struct {
	dir           string
	n, w          int
	seed          uint64
	idHex, expect string
}

// child runs one of the processes the harness spawns:
//
//	commits  open a new store, commit --n transactions, close (sync count)
//	w2       open, print "ready", wait for "go" on stdin, commit --n on its chain
//	open     open + first lookup of --id (W4)
//	writer   commit back to back on chain w00's ref, printing "ack <id>" (W4 kill)
//	recover  open, check --expect is present, commit one (W4 recovery)
func child(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("child: missing command")
	}
	fl := flag.NewFlagSet("child "+args[0], flag.ContinueOnError)
	var a childArgs
	name := fl.String("engine", "", "engine")
	fl.StringVar(&a.dir, "dir", "", "store directory")
	fl.IntVar(&a.n, "n", 0, "commits")
	fl.IntVar(&a.w, "writer", 0, "writer index")
	fl.Uint64Var(&a.seed, "seed", 1, "seed")
	fl.StringVar(&a.idHex, "id", "", "changeset id (hex)")
	fl.StringVar(&a.expect, "expect", "", "last acknowledged id (hex)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	e, err := engine.ByName(*name)
	if err != nil {
		return err
	}
	e = countingEngine(e)
	stop, err := startChildProfile()
	if err != nil {
		return err
	}
	defer stop()
	switch args[0] {
	case "commits":
		return childCommits(e, a)
	case "w2":
		return childW2(e, a)
	case "open":
		return childOpen(e, a)
	case "writer":
		return childWriter(e, a)
	case "recover":
		return childRecover(e, a)
	}
	return fmt.Errorf("child: unknown command %q", args[0])
}

// startChildProfile starts a CPU profile when PEERBENCH_CPUPROFILE=FILE is
// set, to show where an open or a recovery spends its time; %p in FILE is
// replaced by the child's pid, so that W2's writers write one each. The
// returned function stops it.
func startChildProfile() (func(), error) {
	pf := os.Getenv("PEERBENCH_CPUPROFILE")
	if pf == "" {
		return func() {}, nil
	}
	pf = strings.ReplaceAll(pf, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(pf)
	if err != nil {
		return nil, fmt.Errorf("PEERBENCH_CPUPROFILE=%q: %w", pf, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, fmt.Errorf("PEERBENCH_CPUPROFILE=%q: %w", pf, err)
	}
	return pprof.StopCPUProfile, nil
}

// printResult prints a child's metrics as the "result" line the harness reads.
func printResult(m map[string]float64) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("result %s\n", b)
	return err
}

// childCommits creates a store and commits --n transactions (the sync count).
func childCommits(e engine.Engine, a childArgs) error {
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return err
	}
	s, err := e.Open(a.dir, 1)
	if err != nil {
		return err
	}
	if _, _, _, err := commitChain(s, a.seed, 0, 0, a.n, "", engine.Key{}, false); err != nil {
		return err
	}
	return s.Close()
}

// childW2 is one W2 writer: it opens the store, says "ready", waits for
// "go", commits --n on its own chain and prints its writerStat.
func childW2(e engine.Engine, a childArgs) error {
	s, err := e.Open(a.dir, 1)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || line != "go\n" {
		return fmt.Errorf("barrier: %q %v", line, err)
	}
	t0, ru0 := time.Now(), usage()
	l, busy, _, err := commitChain(s, a.seed, a.w, 0, a.n, "", engine.Key{}, false)
	ru1 := usage()
	st := writerStat{ElapsedUs: us(time.Since(t0)), CPUUs: us(ru1.cpu - ru0.cpu), Switches: ru1.switches - ru0.switches,
		Busy: busy, Lat: l}
	if err != nil {
		st.Err = err.Error()
	}
	b, _ := json.Marshal(st)
	fmt.Printf("%s\n", b)
	return nil
}

// childOpen times an open and the first lookup of --id (W4).
func childOpen(e engine.Engine, a childArgs) error {
	id, err := parseKey(a.idHex)
	if err != nil {
		return err
	}
	t0 := time.Now()
	s, err := e.Open(a.dir, 1)
	if err != nil {
		return err
	}
	t1 := time.Now()
	v, err := s.View()
	if err != nil {
		return err
	}
	ok, err := v.Get(id)
	t2 := time.Now()
	if err != nil || !ok {
		return fmt.Errorf("first lookup of %s: found=%v err=%v", a.idHex, ok, err)
	}
	v.Close()
	s.Close()
	return printResult(map[string]float64{"open_us": us(t1.Sub(t0)), "lookup_us": us(t2.Sub(t1))})
}

// childWriter commits back to back on chain w00's ref until it is killed,
// printing "ack <id>" after each acknowledged commit (W4).
func childWriter(e engine.Engine, a childArgs) error {
	s, err := e.Open(a.dir, 1)
	if err != nil {
		return err
	}
	ref, prev, err := chainHead(s, 0)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		_, _, p, err := commitChain(s, a.seed, a.w, i, 1, ref, prev, true)
		if err != nil {
			return err
		}
		prev = p
		fmt.Fprintf(out, "ack %x\n", p[:])
		out.Flush()
	}
}

// childRecover opens the store a killed writer left, commits one
// transaction, and checks that --expect, the last acknowledged id, is
// there (W4 recovery).
func childRecover(e engine.Engine, a childArgs) error {
	want, err := parseKey(a.expect)
	if err != nil {
		return err
	}
	retried := 0.0
	t0 := time.Now()
	s, err := e.Open(a.dir, 1)
	if err != nil {
		return err
	}
	t1 := time.Now()
	ref, head, err := chainHead(s, 0)
	if err != nil {
		return err
	}
	// A reader's view holds the durable prefix; a frame the killed
	// writer appended but did not sync may still move the ref. The
	// compare-and-swap then fails naming the current value, and the
	// commit is retried on it, as any client would.
	_, _, _, err = commitChain(s, a.seed, a.w, 1<<20, 1, ref, head, true)
	var ce *engine.ConflictError
	if errors.As(err, &ce) {
		retried = 1
		_, _, _, err = commitChain(s, a.seed, a.w, 1<<20, 1, ref, ce.Current, true)
	}
	if err != nil {
		return err
	}
	t2 := time.Now()
	v, err := s.View()
	if err != nil {
		return err
	}
	found, err := v.Get(want)
	if err != nil {
		return err
	}
	v.Close()
	s.Close()
	lost := 0.0
	if !found {
		lost = 1
	}
	return printResult(map[string]float64{"open_us": us(t1.Sub(t0)), "write_us": us(t2.Sub(t1)), "lost": lost, "cas_retried": retried})
}

// chainHead returns the ref of chain w and its value, which must exist:
// the chain was loaded or committed before.
func chainHead(s engine.Store, w int) (string, engine.Key, error) {
	ref := engine.RefName(w)
	head, ok, err := s.Head(ref)
	if err != nil || !ok {
		return ref, head, fmt.Errorf("head of %s: %v %v", ref, ok, err)
	}
	return ref, head, nil
}

func parseKey(s string) (engine.Key, error) {
	var k engine.Key
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return k, fmt.Errorf("bad id %q", s)
	}
	copy(k[:], b)
	return k, nil
}

// rusage is what getrusage says of this process: CPU, user and system,
// and context switches, voluntary and not.
type rusage struct {
	cpu      time.Duration
	switches int64
}

func usage() rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return rusage{}
	}
	return rusage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), switches: ru.Nvcsw + ru.Nivcsw}
}
