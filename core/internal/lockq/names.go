package lockq

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Ticket names: ticketPrefix and ticketDigits decimal digits, so that names
// sort as their numbers do.

func ticketName(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return ticketPrefix + strings.Repeat("0", ticketDigits-len(s)) + s
}

func isTicket(n string) bool {
	if len(n) != len(ticketPrefix)+ticketDigits || !strings.HasPrefix(n, ticketPrefix) {
		return false
	}
	for _, c := range n[len(ticketPrefix):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tickets returns every ticket name in the directory, ascending (the
// fixed-width numbers sort as strings).
func (q *Queue) tickets() ([]string, error) {
	d, err := q.fs.Open(q.dir)
	if err != nil {
		return nil, err
	}
	all, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && err != io.EOF {
		return nil, err
	}
	names := all[:0]
	for _, n := range all {
		if isTicket(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Len counts the ticket files in the queue directory: every ticket taken
// and not yet left, and any a dead owner left that no waiter has removed
// yet. Tests use it to see a waiter join or leave the queue.
func (q *Queue) Len() (int, error) {
	names, err := q.tickets()
	return len(names), err
}

func number(name string) uint64 {
	n, _ := strconv.ParseUint(name[len(ticketPrefix):], 10, 64)
	return n
}

func ignoreMissing(err error) error {
	if gone(err) {
		return nil
	}
	return err
}

// gone reports whether err says a ticket's name vanished under the call:
// its owner (or a waiter clearing a dead owner's ticket) unlinked it.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESTALE)
}
