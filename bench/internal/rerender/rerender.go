// Package rerender rebuilds a benchmark's Markdown from its JSON report,
// so that a report's presentation can change without measuring again.
package rerender

import (
	"encoding/json"
	"fmt"
	"os"
)

// File reads the JSON report in as an R, renders it with md, prints the
// Markdown to stdout and writes it to mdOut.
func File[R any](in, mdOut string, md func(*R) string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var rep R
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	out := md(&rep)
	fmt.Print(out)
	return os.WriteFile(mdOut, []byte(out), 0o644)
}
