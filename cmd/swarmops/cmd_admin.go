package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// initCmd is `swarmops init`: create an empty store.
func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create an empty store (in --store, $SWARMOPS_STORE or ./.swarmops)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			s, dir, err := inStoreDir(a, "init", core.Create)
			if err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return err
			}
			a.ok(map[string]any{"store": dir}, lines("initialized an empty store in "+dir))
			return nil
		}),
	}
}

// inStoreDir runs do (core.Create, core.Recover) on the store's directory
// with the options the flags give, for the commands that do not open an
// existing store through withStore. A failure of do is verb's, with
// notStore's hint where the store is missing or already there.
func inStoreDir[T any](a *app, verb string, do func(string, core.Options) (T, error)) (T, string, error) {
	var zero T
	o, err := a.options()
	if err != nil {
		return zero, "", err
	}
	dir := a.storeDir()
	v, err := do(dir, o)
	if err != nil {
		return zero, dir, a.notStore(verb, err)
	}
	return v, dir, nil
}

// infoCmd is `swarmops info`: counts and durable positions.
func (a *app) infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Counts, the durable position and the last checkpoint",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				in, err := s.Info()
				if err != nil {
					return err
				}
				data := map[string]any{"store": a.storeDir(), "changesets": in.Changesets, "objects": in.Objects,
					"loose_objects": in.LooseObjects, "refs": in.Refs, "journal_bytes": in.JournalBytes,
					"segments": in.Segments, "durable_seq": in.DurableSeq, "durable_offset": in.DurableOffset,
					"checkpoint_seq": in.CheckpointSeq}
				a.ok(data, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
					fmt.Fprintf(tw, "store:\t%s\nchangesets:\t%d\nobjects:\t%d (%d loose)\nrefs:\t%d\njournal:\t%d bytes in %d segments\ndurable:\tseq %d, offset %d\ncheckpoint:\tseq %d\n",
						a.storeDir(), in.Changesets, in.Objects, in.LooseObjects, in.Refs, in.JournalBytes, in.Segments,
						in.DurableSeq, in.DurableOffset, in.CheckpointSeq)
					tw.Flush()
				})
				return nil
			})
		}),
	}
}

// problemsJSON renders verification problems.
func problemsJSON(ps []core.VerifyProblem) []map[string]any {
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		out[i] = map[string]any{"file": p.File, "offset": p.Offset, "object": p.Object, "reason": p.Reason}
	}
	return out
}

// verifyCmd is `swarmops verify`: check frames and, with --deep, objects.
func (a *app) verifyCmd() *cobra.Command {
	var deep bool
	cmd := &cobra.Command{
		Use:   "verify [--deep]",
		Short: "Check frames (and with --deep every object's hash); E_CORRUPT lists problems",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				var prog func(done, total int)
				if deep {
					prog = a.progress("verify")
				}
				r, err := s.Verify(deep, prog)
				if err != nil {
					return err
				}
				if len(r.Problems) > 0 {
					a.fail = &cliError{kind: kindCorrupt,
						err:   fmt.Errorf("verify found %d problems in %d frames and %d objects", len(r.Problems), r.Frames, r.Objects),
						extra: map[string]any{"problems": problemsJSON(r.Problems)}}
					return nil
				}
				a.ok(map[string]any{"deep": deep, "frames": r.Frames, "objects": r.Objects, "problems": []any{}},
					lines(fmt.Sprintf("ok: %d frames, %d objects checked", r.Frames, r.Objects)))
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&deep, "deep", false, "also read every object and check its hash")
	return cmd
}

// recoverCmd is `swarmops recover`: explicit repair, then the checks of
// verify --deep, reported by exit status.
func (a *app) recoverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "recover",
		Short: "Repair a torn journal tail, check as verify --deep does, and report; exit 0 clean, E_REPAIRED cut, E_CORRUPT corrupt",
		Long: `Open the store with repair, then check it as verify --deep does, and report.
The exit status says which case it was: 0 (E_* none) when there was nothing
to repair and every check passed, 12 (E_REPAIRED) when a torn tail of
unacknowledged bytes was cut and every check passed after it, 6 (E_CORRUPT)
when corruption was found: inside the acknowledged journal prefix (nothing is
cut then: the store fails closed), or by the deep check in any frame, index
run, reflog chunk, loose object or reference ("corrupt" lists them all).
Recover repairs only the torn tail; it rebuilds no damaged file.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			r, _, err := inStoreDir(a, "recover", core.Recover)
			if err != nil {
				return err
			}
			extra := map[string]any{"torn_bytes_cut": r.TornBytesCut, "frames_replayed": r.FramesReplayed,
				"corrupt": problemsJSON(r.Corrupt)}
			if len(r.Corrupt) > 0 {
				a.fail = &cliError{kind: kindCorrupt, err: fmt.Errorf("recover found %d corrupt places; nothing was cut", len(r.Corrupt)), extra: extra}
				return nil
			}
			// The repair reads only the frames after the checkpoint; the
			// deep check reads everything else (older frames, index runs,
			// the reflog, loose objects), so that exit 0 means what verify
			// --deep's does.
			var v *core.VerifyReport
			if err := a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				v, err = s.Verify(true, a.progress("recover: verify"))
				return err
			}); err != nil {
				return err
			}
			switch {
			case len(v.Problems) > 0:
				extra["corrupt"] = problemsJSON(v.Problems)
				a.fail = &cliError{kind: kindCorrupt, err: fmt.Errorf("recover cut %d torn bytes, but the deep check found %d problems in %d frames and %d objects; recover rebuilds no damaged file",
					r.TornBytesCut, len(v.Problems), v.Frames, v.Objects), extra: extra}
			case r.TornBytesCut > 0:
				a.fail = &cliError{kind: kindRepaired, err: fmt.Errorf("recover cut a torn tail of %d bytes; %d frames replayed; the store is consistent (deep check: %d frames, %d objects)",
					r.TornBytesCut, r.FramesReplayed, v.Frames, v.Objects), extra: extra}
			default:
				a.ok(extra, lines(fmt.Sprintf("nothing to repair: %d frames replayed; deep check: %d frames, %d objects, no problems", r.FramesReplayed, v.Frames, v.Objects)))
			}
			return nil
		}),
	}
}
