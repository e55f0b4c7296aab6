package main

import (
	"os"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// progress returns a progress callback that draws a bar on stderr when
// stderr is a terminal, and nil (no bar, no cost) when it is not: piped
// output and agents get clean streams.
func (a *app) progress(what string) func(done, total int) {
	f, ok := a.stderr.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(f),
				progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100_000_000))
		}
		bar.Set(done)
		if done >= total {
			bar.Finish()
		}
	}
}
