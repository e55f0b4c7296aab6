package lockq

import (
	"errors"
	"io/fs"
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
