package index

import (
	"bytes"
	"encoding/binary"

	"github.com/swarmops/swarmops/core/objects"
)

func (r *Run) csFromRec(rec []byte) (CSRecord, error) {
	var c CSRecord
	extra, ref := decodeCS(rec, &c)
	if extra > 0 {
		if err := r.heapParents(ref, c.Parents[1:]); err != nil {
			return c, err
		}
	}
	return c, nil
}

func objFromRec(_ *Run, rec []byte) (ObjRecord, error) { return decodeObj(rec), nil }

// Changeset looks up a changeset record by id.
func (r *Run) Changeset(id objects.ID) (CSRecord, bool, error) {
	return lookup(r, tabCS, id, (*Run).csFromRec)
}

// Object looks up a blob or tree record by id.
func (r *Run) Object(id objects.ID) (ObjRecord, bool, error) {
	return lookup(r, tabObj, id, objFromRec)
}

// lookup finds the record of id in table tab and decodes it with dec; a
// record dec fails on is an error, not a find.
func lookup[T any](r *Run, tab byte, id objects.ID, dec func(r *Run, rec []byte) (T, error)) (T, bool, error) {
	var out T
	found := false
	if r.excludes(tab, id[:]) {
		return out, false, r.countLookup()
	}
	err := r.scan(tab, id[:], id[:], func(_ uint64, rec []byte) (bool, error) {
		if bytes.Equal(rec[:32], id[:]) {
			v, err := dec(r, rec)
			out, found = v, err == nil
			return false, err
		}
		return false, nil
	})
	return out, found, err
}

// HasChangeset reports whether the run holds a changeset record with this
// id. It is for a caller that checks ids it expects to be absent (replay's
// and a writer's duplicate checks): it does not count towards the preload
// of every fanout and filter, whose size, at a million records, costs more
// than a few hundred such checks. It loads the changeset filter alone once
// its checks have paid for it (see has), or at once when told that enough
// are coming (ExpectChangesetChecks).
func (r *Run) HasChangeset(id objects.ID) (bool, error) {
	return r.has(tabCS, id)
}

// HasObject is HasChangeset for blobs and trees (a checkpoint's duplicate
// check).
func (r *Run) HasObject(id objects.ID) (bool, error) {
	return r.has(tabObj, id)
}

func (r *Run) has(tab byte, id objects.ID) (bool, error) {
	// Without its filter in memory a check costs two small reads. The
	// filter is loaded once the checks made without it have cost about as
	// much as loading it (FilterBytesPerCheck bytes a check), so a process
	// never pays more than about twice what knowing its future would
	// have cost, whether it makes ten checks or ten million.
	if fl := r.h.filt[tab]; fl.blocks > 0 && r.filt[tab].Load() == nil {
		if r.checks[tab].Add(1)*FilterBytesPerCheck >= int64(fl.blocks)*filterBlockSize {
			if _, err := r.filter(tab); err != nil {
				return false, err
			}
		}
	}
	if r.excludes(tab, id[:]) {
		return false, nil
	}
	found := false
	err := r.scanWith(tab, id[:], id[:], false, func(_ uint64, rec []byte) (bool, error) {
		found = bytes.Equal(rec[:32], id[:])
		return false, nil
	})
	return found, err
}

// FilterBytesPerCheck weighs a filter's load against the presence checks
// it saves: a check without it is two small reads of the run, about as
// costly as reading and checksumming 2 KiB of filter (at 1M changesets on
// the reference machine a pread cost about 10 us, and a run's 1 MiB
// changeset filter took 5.2 ms to read and check).
const FilterBytesPerCheck = 2048

// ExpectChangesetChecks tells the run that about n presence checks of
// changesets are coming (a replay of n frames): it loads the changeset
// filter now if they would cost more than loading it, saving the checks
// has would make before it loads the filter by itself.
func (r *Run) ExpectChangesetChecks(n int) error { return r.expect(tabCS, n) }

// ExpectObjectChecks is ExpectChangesetChecks for blobs and trees (a
// checkpoint's batch).
func (r *Run) ExpectObjectChecks(n int) error { return r.expect(tabObj, n) }

func (r *Run) expect(tab byte, n int) error {
	if int64(n)*FilterBytesPerCheck < int64(r.h.filt[tab].blocks)*filterBlockSize {
		return nil
	}
	_, err := r.filter(tab)
	return err
}

// prefixBounds returns the lowest id with prefix p and an id in the
// bucket of the highest one.
func prefixBounds(p objects.Prefix) (low, high objects.ID) {
	low = p.Low()
	high = low
	if p.Nibbles < 8 {
		// The bucket of the last id with the prefix: set the remaining bits
		// of the first four bytes.
		v := binary.BigEndian.Uint32(low[:4]) | (1<<(32-4*p.Nibbles) - 1)
		binary.BigEndian.PutUint32(high[:4], v)
	}
	return low, high
}

// ChangesetPrefix calls visit, in id order, with the id and generation of
// every changeset record whose id starts with p, until visit returns false.
// It reads only the changeset table (not the object table, not the parent
// heap): what a caller resolving a changeset revision needs.
func (r *Run) ChangesetPrefix(p objects.Prefix, visit func(id objects.ID, generation uint64) bool) error {
	low, high := prefixBounds(p)
	if r.excludesPrefix(tabCS, p, low) {
		return r.countLookup()
	}
	return r.scan(tabCS, low[:], high[:], func(_ uint64, rec []byte) (bool, error) {
		var id objects.ID
		copy(id[:], rec[:32])
		if !p.Match(id) {
			return false, nil
		}
		return visit(id, binary.BigEndian.Uint64(rec[96:])), nil
	})
}

// prefix appends to out the records of either table whose ids start with
// p, at most max of each.
func (r *Run) prefix(p objects.Prefix, max int, out []Match) ([]Match, error) {
	low, high := prefixBounds(p)
	for _, tab := range []byte{tabCS, tabObj} {
		if r.excludesPrefix(tab, p, low) {
			if err := r.countLookup(); err != nil {
				return out, err
			}
			continue
		}
		n := 0
		err := r.scan(tab, low[:], high[:], func(_ uint64, rec []byte) (bool, error) {
			var id objects.ID
			copy(id[:], rec[:32])
			if !p.Match(id) {
				return false, nil
			}
			k := objects.KindChangeset
			if tab == tabObj {
				k = objects.Kind(rec[32])
			}
			out = append(out, Match{ID: id, Kind: k})
			n++
			return n < max, nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// byDelta appends the ids of changesets with delta hash h.
func (r *Run) byDelta(h objects.Hash, out []objects.ID) ([]objects.ID, error) {
	err := r.scan(tabDelta, h[:], h[:], func(_ uint64, rec []byte) (bool, error) {
		if !bytes.Equal(rec[:32], h[:]) {
			return false, nil
		}
		var id objects.ID
		copy(id[:], rec[32:64])
		out = append(out, id)
		return true, nil
	})
	return out, err
}

// ByDelta returns the ids of the run's changesets with delta hash h, sorted.
func (r *Run) ByDelta(h objects.Hash) ([]objects.ID, error) { return r.byDelta(h, nil) }

// Prefix returns up to max ids of the run (changesets first, then objects)
// starting with p.
func (r *Run) Prefix(p objects.Prefix, max int) ([]Match, error) { return r.prefix(p, max, nil) }
