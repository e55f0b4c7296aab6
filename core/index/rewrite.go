package index

import "github.com/swarmops/swarmops/core/vfs"

// RewriteRuns writes one run at dst (same protocol as WriteRun) holding the
// records of v, newest first where ids repeat, that keepCS and keepObj
// accept, together with every record of extra. A record of extra wins over
// one of v with the same id: garbage collection passes the new locations
// of the objects it copied forward there, and drops the old ones with the
// keep functions. It holds the records in memory.
func RewriteRuns(fsys vfs.FS, dst string, meta uint64, v *View, keepCS func(*CSRecord) bool,
	keepObj func(*ObjRecord) bool, extra Batch) (*Run, error) {
	b := Batch{
		Changesets: append([]CSRecord(nil), extra.Changesets...),
		Objects:    append([]ObjRecord(nil), extra.Objects...),
	}
	err := v.ForEachChangeset(func(r CSRecord) error {
		if keepCS(&r) {
			b.Changesets = append(b.Changesets, r)
		}
		return nil
	})
	if err == nil {
		err = v.ForEachObject(func(r ObjRecord) error {
			if keepObj(&r) {
				b.Objects = append(b.Objects, r)
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	// WriteRun keeps the first record of each id: extra's.
	return WriteRun(fsys, dst, meta, b)
}
