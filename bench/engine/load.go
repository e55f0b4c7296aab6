package engine

// staged is one transaction of a bulk load: linked to its chain
// predecessor, with its generation (its position in the chain, from 1).
type staged struct {
	t   *Txn
	gen uint64
}

// loadBatches is the bulk load the peers share: it links every transaction
// of the chains to its chain predecessor (a chain's generations are known
// from its positions, so no parent is read back), hands them to put in
// interleave order in batches of at most n, and returns each chain's ids.
func loadBatches(chains [][]Txn, n int, put func(batch []staged) error) ([][]Key, error) {
	order := interleave(chains)
	for start := 0; start < len(order); start += n {
		batch := make([]staged, 0, min(n, len(order)-start))
		for _, p := range order[start:min(start+n, len(order))] {
			t := &chains[p[0]][p[1]]
			if p[1] > 0 {
				t.Parent, t.HasParent = chains[p[0]][p[1]-1].ID, true
			}
			batch = append(batch, staged{t, uint64(p[1] + 1)})
		}
		if err := put(batch); err != nil {
			return nil, err
		}
	}
	ids := make([][]Key, len(chains))
	for w, c := range chains {
		for _, t := range c {
			ids[w] = append(ids[w], t.ID)
		}
	}
	return ids, nil
}

// interleave lists (chain, position) pairs round-robin over the chains, the
// order in which concurrent writers would have committed them.
func interleave(chains [][]Txn) [][2]int {
	var out [][2]int
	for i := 0; ; i++ {
		any := false
		for w := range chains {
			if i < len(chains[w]) {
				out = append(out, [2]int{w, i})
				any = true
			}
		}
		if !any {
			return out
		}
	}
}
