package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// watchFlags are the flags of one `swarmops watch`.
type watchFlags struct {
	from       uint64
	fromSet    bool
	poll, wait time.Duration
	once       bool
	refs       []string
}

// watchCmd is `swarmops watch`: a stream of ref moves as they become
// durable.
func (a *app) watchCmd() *cobra.Command {
	var w watchFlags
	cmd := &cobra.Command{
		Use:   "watch [--from SEQ] [--poll DURATION] [--once [--wait DURATION]] [REF...]",
		Short: "Print every ref move as it becomes durable (of REFs, or of every ref), until stopped",
		Long: `Print the ref moves of the store as they become durable, oldest first, until
SIGINT or SIGTERM (exit status 0), or until the client of a server goes
away. Each move is printed as 'swarmops op log' prints it; with --json, each
is one line holding one compact envelope {"ok":true,"data":MOVE}, whose
"seq" is the journal sequence number of the frame that made the move. A
failure ends the stream with an error envelope and a non-zero exit status,
as for every command.

Without --from the stream starts now: only moves made after it starts are
printed. --from SEQ starts after sequence number SEQ, so a reader that
stopped (or lost its server, or saw the store crash) resumes exactly where
it was by passing the "seq" of the last move it read: the sequence numbers
come from the journal, and only durable moves are ever printed, so no move
is missed or repeated. The moves of one frame are printed together; if a
reader stopped inside a frame that moved several refs (ids SEQ:REF), it
passes SEQ-1 and skips the moves of SEQ it has.

The store is polled every --poll (a read of its state file). --once prints
the moves after --from (or none) as one envelope {"moves":[...],"seq":S},
waiting up to --wait for the first if there are none yet; S is the
sequence number to pass as the next --from.`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			for _, r := range args {
				if err := checkRefName(r); err != nil {
					return usagef("watch: %w", err)
				}
			}
			if w.poll <= 0 {
				return usagef("watch: --poll %v: want a positive duration", w.poll)
			}
			if w.wait < 0 || (w.wait > 0 && !w.once) {
				return usagef("watch: --wait %v: want a positive duration, with --once", w.wait)
			}
			w.refs, w.fromSet = args, cmd.Flags().Changed("from")
			s, release, err := a.open()
			if err != nil {
				return err
			}
			defer release()
			if w.once {
				return a.watchOnce(s, w)
			}
			return a.watch(s, w)
		}),
	}
	f := cmd.Flags()
	f.Uint64Var(&w.from, "from", 0, "print the moves after this sequence number (default: from now)")
	f.DurationVar(&w.poll, "poll", 10*time.Millisecond, "how often to look for new durable moves")
	f.BoolVar(&w.once, "once", false, "print the moves after --from as one envelope and exit")
	f.DurationVar(&w.wait, "wait", 0, "with --once: how long to wait for a first move")
	return cmd
}

// watch prints moves until it is stopped.
func (a *app) watch(s *core.Store, w watchFlags) error {
	stop := a.done
	if stop == nil {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sig)
		ch := make(chan struct{})
		go func() {
			<-sig
			close(ch)
		}()
		stop = ch
	}
	last, err := a.watchStart(s, w)
	if err != nil {
		return err
	}
	jsonOut := a.jsonOut || a.jsonFlag
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	a.flushed = true // the stream is the output: nothing follows a clean stop
	for {
		ms, seq, err := movesAfter(s, last, w.refs)
		if err != nil {
			a.flushed = false
			return err
		}
		for _, m := range ms {
			if jsonOut {
				err = enc.Encode(struct {
					OK   bool `json:"ok"`
					Data any  `json:"data"`
				}{true, moveJSON(m)})
			} else {
				_, err = fmt.Fprintln(a.stdout, moveText(m))
			}
			if err != nil {
				// The reader went away (a closed pipe, a client gone):
				// nobody is left to tell.
				return nil
			}
		}
		last = seq
		select {
		case <-stop:
			return a.serverWent(last)
		case <-time.After(w.poll):
		}
	}
}

// serverWent is how a watch ends when it was told to stop: cleanly, unless
// the server it ran in is stopping, which its client must hear as the
// server gone (E_UNAVAILABLE, as when the server dies) with where to
// resume, not as the stream's end.
func (a *app) serverWent(last uint64) error {
	select {
	case <-a.serverStopping:
	default:
		return nil
	}
	a.flushed = false
	return &cliError{kind: kindGone, err: errors.New("the server stopped"), subject: map[string]any{"seq": last},
		msg:  "watch: the store's server stopped",
		hint: fmt.Sprintf("watch again with --from %d (through the next server, or in this process)", last)}
}

// watchStart returns the sequence number the stream starts after: --from,
// else the durable end now.
func (a *app) watchStart(s *core.Store, w watchFlags) (uint64, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return 0, err
	}
	if !w.fromSet {
		return sn.Seq(), nil
	}
	if w.from > sn.Seq() {
		// Every sequence number a watch printed is durable, so one past
		// the store's end was never this store's: a watch from it would
		// skip every move until the store reached it.
		return 0, usageHint(nil, nil, "watch: --from %d is past this store's last durable frame (%d)", w.from, sn.Seq())
	}
	return w.from, nil
}

// movesAfter returns the durable moves of refs (none: every ref) after
// last, and the sequence number they run to: a snapshot's, which covers
// frames that moved nothing too. It reads only the durable record when
// nothing new is durable.
func movesAfter(s *core.Store, last uint64, refs []string) ([]core.RefMove, uint64, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, last, err
	}
	if sn.Seq() <= last {
		return nil, last, nil
	}
	ms, err := sn.Moves(core.MoveQuery{After: last, Refs: refs})
	return ms, sn.Seq(), err
}

// watchOnce prints the moves after --from as one envelope, waiting up to
// --wait for a first one: a long poll, for callers that cannot read a
// stream (an MCP tool).
func (a *app) watchOnce(s *core.Store, w watchFlags) error {
	last, err := a.watchStart(s, w)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(w.wait)
	var ms []core.RefMove
	for {
		var seq uint64
		if ms, seq, err = movesAfter(s, last, w.refs); err != nil {
			return err
		}
		last = max(last, seq)
		if len(ms) > 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-a.done:
			return a.serverWent(last)
		case <-time.After(min(w.poll, time.Until(deadline))):
		}
	}
	out := make([]map[string]any, len(ms))
	for i, m := range ms {
		out[i] = moveJSON(m)
	}
	a.ok(map[string]any{"moves": out, "seq": last}, func(wr io.Writer) {
		for _, m := range ms {
			fmt.Fprintln(wr, moveText(m))
		}
	})
	return nil
}

// exitOnSignal makes SIGINT and SIGTERM end this process with status 0
// while a watch streams through a server: the stream is the command's
// output, and stopping it is how it ends well, as it does when the watch
// runs here. The returned function undoes it.
func exitOnSignal() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
			os.Exit(0)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}
