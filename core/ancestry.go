package core

// MergeBase returns the nearest common ancestor of changesets a and b (the
// one with the highest generation, ties broken by the smaller id), or the
// zero id when they share none. Land merges from it; a work tree's update
// merges from it too, so that changes committed on the tree's base but
// not yet in b are carried, not reverted.
func (sn *Snapshot) MergeBase(a, b ID) (ID, error) { return mergeBase(sn, a, b) }
