package core_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// envCount reads a positive count from the environment variable name
// (default def); a malformed value is a hard error.
func envCount(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envCounts reads a comma-separated list of positive counts from the
// environment variable name (default def, in the same form); a malformed
// value is a hard error.
func envCounts(tb testing.TB, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			tb.Fatalf("%s=%q: want positive integers, comma-separated", name, v)
		}
		out = append(out, n)
	}
	return out
}
