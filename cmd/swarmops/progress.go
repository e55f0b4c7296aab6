package main

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// progress returns a progress callback that draws a bar on stderr when
// stderr is a terminal, and nil (no bar, no cost) when it is not: piped
// output and agents get clean streams.
//
// Under a server, stderr is the client's, and the client said whether it
// is a terminal (stderrTTY).
func (a *app) progress(what string) func(done, total int) {
	var w io.Writer = a.stderr
	if f, ok := a.stderr.(*os.File); ok {
		if !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			return nil
		}
	} else if !a.stderrTTY {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100_000_000))
		}
		bar.Set(done)
		if done >= total {
			bar.Finish()
		}
	}
}
