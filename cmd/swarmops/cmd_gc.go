package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// defaultRetention is gc's reflog retention window when --retention is
// not given: a day of moves can be undone after a gc.
const defaultRetention = 24 * time.Hour

// gcCmd is `swarmops gc`: reclaim what no ref, recent reflog move or live
// lease reaches.
func (a *app) gcCmd() *cobra.Command {
	var retention time.Duration
	cmd := &cobra.Command{
		Use:   "gc [--retention DUR]",
		Short: "Remove what no ref, no reflog move within --retention and no live lease reaches, and reclaim its disk space",
		Long: `Remove the changesets and objects that no ref, no reflog move within the
retention window (their old and new values), no live lease and no
changeset made within the window reaches, and
reclaim their space: the journal segments before the newest checkpoint (live
objects in them are copied forward first), their index records, and
unreachable loose objects. It runs beside agents that commit and land:
a work tree holds its base with a lease (checkout, update and commit --dir
renew it), and a commit built against the index from before the gc is
built again. A changeset nothing else holds (a commit without --advance,
outside a work tree) is kept while it is younger than the retention, as
git keeps young unreachable objects. --json reports what was kept and
reclaimed, and the leases that kept objects.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if retention < 0 {
				return usagef("gc: --retention must not be negative, got %v", retention)
			}
			return a.withStore(func(s *core.Store, _ *core.Snapshot) error {
				start := time.Now()
				r, err := s.GC(core.GCOptions{Retention: retention})
				if err != nil {
					return err
				}
				leases, bad := r.Leases, r.LeasesBad
				if leases == nil {
					leases = []string{}
				}
				if bad == nil {
					bad = []string{}
				}
				data := map[string]any{"retention": retention.String(), "live": r.Live, "refs": r.Refs,
					"reflog_roots": r.ReflogRoots, "fresh_roots": r.FreshRoots, "leases": leases, "leased_roots": r.LeasedRoots,
					"leases_expired": r.LeasesExpired, "leases_bad": bad, "copied": r.Copied, "copied_bytes": r.CopiedBytes,
					"records_dropped": r.RecordsDropped, "segments_removed": r.SegmentsRemoved,
					"loose_removed": r.LooseRemoved, "seconds": time.Since(start).Seconds()}
				for _, n := range r.LeasesBad {
					fmt.Fprintf(a.stderr, "warning: removed lease %s, which did not decode (a power loss can tear one; its work tree leases again on its next command)\n", n)
				}
				a.ok(data, lines(
					fmt.Sprintf("kept %d live objects (%d refs, %d reflog roots, %d leases holding %d roots)",
						r.Live, r.Refs, r.ReflogRoots, len(r.Leases), r.LeasedRoots),
					fmt.Sprintf("copied %d objects (%d bytes) forward; removed %d segments, %d loose objects, %d index records; %d expired leases",
						r.Copied, r.CopiedBytes, r.SegmentsRemoved, r.LooseRemoved, r.RecordsDropped, r.LeasesExpired)))
				return nil
			})
		}),
	}
	cmd.Flags().DurationVar(&retention, "retention", defaultRetention, "keep what reflog moves newer than this name")
	return cmd
}

// treeLeaseTTL is how long a checkout or an update holds its base from
// garbage collection; the next update renews it.
const treeLeaseTTL = 24 * time.Hour

// leaseTree writes (or renews) the lease of the work tree in dir on its
// base id, named after the tree's absolute path.
func (a *app) leaseTree(s *core.Store, dir string, id core.ID) error {
	abs, err := filepath.Abs(a.path(dir))
	if err != nil {
		return err
	}
	return s.Lease(treeLeaseName(abs), []core.ID{id}, treeLeaseTTL)
}

// treeLeaseName names the lease of the work tree at the absolute path abs.
func treeLeaseName(abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return "tree-" + hex.EncodeToString(sum[:8])
}
