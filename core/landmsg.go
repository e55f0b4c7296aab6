package core

import "strings"

// LandMessage is the message of a land's merge changeset when its caller
// gives none: "land NAME onto ONTO: SUBJECT", where SUBJECT is the first
// non-empty line of the landed change's own message. It puts what landed in
// the first-parent history of the target (`log --oneline main`). A change
// with no message gives "land NAME onto ONTO".
func LandMessage(name, onto, changeMessage string) string {
	msg := "land " + name + " onto " + onto
	if s := subject(changeMessage); s != "" {
		msg += ": " + s
	}
	return msg
}

// subject returns the first non-blank line of a message, trimmed.
func subject(message string) string {
	for _, line := range strings.Split(message, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
