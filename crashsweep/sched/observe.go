package sched

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/swarmops/swarmops/faultfs"
)

// Finding is one broken claim.
type Finding struct {
	Claim  string // "exclusion", "fifo", "C1", "linearizable", "error", ...
	Detail string
	Step   int // the scheduling step it was seen at (0: after the run)
}

func (f Finding) String() string {
	if f.Step > 0 {
		return fmt.Sprintf("%s at step %d: %s", f.Claim, f.Step, f.Detail)
	}
	return fmt.Sprintf("%s: %s", f.Claim, f.Detail)
}

// observer watches the agents' lock calls as the scheduler runs them:
// exclusion of the writer lock (never two agents between taking LOCK and
// releasing it) and first-come, first-served service of the writer queue
// (C8: an agent that takes LOCK from a ticket has no live ticket ahead of
// it whose owner has not had the lock yet). The scheduler holds its mutex around every method.
type observer struct {
	step     func() int
	writer   int          // the agent holding LOCK, 0: none
	guard    int          // the agent holding the queue's GUARD
	tickets  map[int]int  // ticket number -> agent, while its file exists
	ticketOf map[int]int  // agent -> its live ticket number
	served   map[int]bool // live tickets whose owner has taken LOCK
	findings []Finding
}

func newObserver() *observer {
	return &observer{tickets: map[int]int{}, ticketOf: map[int]int{}, served: map[int]bool{}}
}

func (o *observer) find(claim, format string, a ...any) {
	st := 0
	if o.step != nil {
		st = o.step()
	}
	o.findings = append(o.findings, Finding{Claim: claim, Detail: fmt.Sprintf(format, a...), Step: st})
}

// ticketNum returns N for a path lockq/tN.
func ticketNum(p string) (int, bool) {
	if path.Base(path.Dir(p)) != "lockq" {
		return 0, false
	}
	b := path.Base(p)
	if !strings.HasPrefix(b, "t") {
		return 0, false
	}
	n, err := strconv.Atoi(b[1:])
	return n, err == nil
}

func (o *observer) call(agent int, op faultfs.Op, p string) {
	if op != faultfs.OpRemove {
		return
	}
	if n, ok := ticketNum(p); ok {
		if owner, live := o.tickets[n]; live {
			delete(o.tickets, n)
			delete(o.served, n)
			if o.ticketOf[owner] == n {
				delete(o.ticketOf, owner)
			}
		}
	}
}

func (o *observer) locked(agent int, name string, timeout time.Duration) {
	switch {
	case base(name) == "LOCK":
		if o.writer != 0 {
			o.find("exclusion", "agent %d took the writer lock while agent %d held it", agent, o.writer)
		}
		o.writer = agent
		if mine, ok := o.ticketOf[agent]; ok {
			o.served[mine] = true
			var ahead []string
			for n, owner := range o.tickets {
				if n < mine && owner != agent && !o.served[n] {
					ahead = append(ahead, fmt.Sprintf("t%d (agent %d)", n, owner))
				}
			}
			if len(ahead) > 0 {
				sort.Strings(ahead)
				o.find("fifo", "agent %d took the writer lock with ticket t%d while %s waited ahead of it", agent, mine, strings.Join(ahead, ", "))
			}
		}
	case base(name) == "GUARD":
		o.guard = agent
	default:
		if n, ok := ticketNum(name); ok && o.guard == agent && timeout == 0 {
			o.tickets[n] = agent
			o.ticketOf[agent] = n
		}
	}
}

func (o *observer) unlocked(agent int, name string) {
	switch base(name) {
	case "LOCK":
		if o.writer == agent {
			o.writer = 0
		}
	case "GUARD":
		if o.guard == agent {
			o.guard = 0
		}
	}
}
