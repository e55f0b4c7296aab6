// Command storeproc is a test helper: one writer process for the core
// specs. It opens the store in its first argument and makes N commits (the
// second argument), each advancing the ref main by compare-and-swap and
// retrying on conflict, as an agent would.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/swarmops/swarmops/core"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: storeproc DIR N NAME")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "storeproc: bad count %q\n", os.Args[2])
		os.Exit(2)
	}
	s, err := core.Open(os.Args[1], core.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "storeproc: open:", err)
		os.Exit(1)
	}
	defer s.Close()
	for i := 0; i < n; {
		sn, err := s.Snapshot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "storeproc: snapshot:", err)
			os.Exit(1)
		}
		req := core.CommitRequest{Advance: "main", Agent: os.Args[3],
			Changes: []core.Change{{Path: os.Args[3] + "/" + strconv.Itoa(i), Data: []byte(strconv.Itoa(i))}}}
		if head, err := sn.Ref("main"); err == nil {
			req.Parents = []core.ID{head}
		}
		_, err = s.Commit(req)
		if errors.Is(err, core.ErrConflict) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "storeproc: commit:", err)
			os.Exit(1)
		}
		i++
	}
}
