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
	"time"

	"github.com/swarmops/swarmops/bench/engine"
)

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
	name := fl.String("engine", "", "engine")
	dir := fl.String("dir", "", "store directory")
	n := fl.Int("n", 0, "commits")
	w := fl.Int("writer", 0, "writer index")
	seed := fl.Uint64("seed", 1, "seed")
	idHex := fl.String("id", "", "changeset id (hex)")
	expect := fl.String("expect", "", "last acknowledged id (hex)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	e, err := engine.ByName(*name)
	if err != nil {
		return err
	}
	e = countingEngine(e)
	// PEERBENCH_CPUPROFILE=FILE writes a CPU profile of this child, to
	// show where an open or a recovery spends its time; %p in FILE is
	// replaced by the child's pid, so that W2's writers write one each.
	if pf := os.Getenv("PEERBENCH_CPUPROFILE"); pf != "" {
		pf = strings.ReplaceAll(pf, "%p", strconv.Itoa(os.Getpid()))
		f, err := os.Create(pf)
		if err != nil {
			return fmt.Errorf("PEERBENCH_CPUPROFILE=%q: %w", pf, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("PEERBENCH_CPUPROFILE=%q: %w", pf, err)
		}
		defer pprof.StopCPUProfile()
	}
	result := func(m map[string]float64) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Printf("result %s\n", b)
		return err
	}
	switch args[0] {
	case "commits":
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		s, err := e.Open(*dir, 1)
		if err != nil {
			return err
		}
		if _, _, _, err := commitChain(s, *seed, 0, 0, *n, "", engine.Key{}, false); err != nil {
			return err
		}
		return s.Close()
	case "w2":
		s, err := e.Open(*dir, 1)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Println("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil || line != "go\n" {
			return fmt.Errorf("barrier: %q %v", line, err)
		}
		t0 := time.Now()
		l, busy, _, err := commitChain(s, *seed, *w, 0, *n, "", engine.Key{}, false)
		st := writerStat{ElapsedUs: us(time.Since(t0)), Busy: busy, Lat: l}
		if err != nil {
			st.Err = err.Error()
		}
		b, _ := json.Marshal(st)
		fmt.Printf("%s\n", b)
		return nil
	case "open":
		id, err := parseKey(*idHex)
		if err != nil {
			return err
		}
		t0 := time.Now()
		s, err := e.Open(*dir, 1)
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
			return fmt.Errorf("first lookup of %s: found=%v err=%v", *idHex, ok, err)
		}
		v.Close()
		s.Close()
		return result(map[string]float64{"open_us": us(t1.Sub(t0)), "lookup_us": us(t2.Sub(t1))})
	case "writer":
		s, err := e.Open(*dir, 1)
		if err != nil {
			return err
		}
		ref := engine.RefName(0)
		prev, ok, err := s.Head(ref)
		if err != nil || !ok {
			return fmt.Errorf("head of %s: %v %v", ref, ok, err)
		}
		out := bufio.NewWriter(os.Stdout)
		for i := 0; ; i++ {
			_, _, p, err := commitChain(s, *seed, *w, i, 1, ref, prev, true)
			if err != nil {
				return err
			}
			prev = p
			fmt.Fprintf(out, "ack %x\n", p[:])
			out.Flush()
		}
	case "recover":
		want, err := parseKey(*expect)
		if err != nil {
			return err
		}
		retried := 0.0
		t0 := time.Now()
		s, err := e.Open(*dir, 1)
		if err != nil {
			return err
		}
		t1 := time.Now()
		ref := engine.RefName(0)
		head, ok, err := s.Head(ref)
		if err != nil || !ok {
			return fmt.Errorf("head of %s: %v %v", ref, ok, err)
		}
		// A reader's view holds the durable prefix; a frame the killed
		// writer appended but did not sync may still move the ref. The
		// compare-and-swap then fails naming the current value, and the
		// commit is retried on it, as any client would.
		_, _, _, err = commitChain(s, *seed, *w, 1<<20, 1, ref, head, true)
		var ce *engine.ConflictError
		if errors.As(err, &ce) {
			retried = 1
			_, _, _, err = commitChain(s, *seed, *w, 1<<20, 1, ref, ce.Current, true)
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
		return result(map[string]float64{"open_us": us(t1.Sub(t0)), "write_us": us(t2.Sub(t1)), "lost": lost, "cas_retried": retried})
	}
	return fmt.Errorf("child: unknown command %q", args[0])
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
