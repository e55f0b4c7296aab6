package server

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/internal/testknobs"
)

// TestTheReplyLeavesOnlyAfterTheHandlerReturns: a handler that has read
// all its stdin and not yet returned (a commit before its sync step) has
// told its client nothing; its status and output arrive once it returns.
// With the canary server-early-reply the client is told status 0 first,
// which is what the check exists to notice.
func TestTheReplyLeavesOnlyAfterTheHandlerReturns(t *testing.T) {
	for _, early := range []bool{false, true} {
		release := make(chan struct{})
		h := func(inv *Invocation) int {
			io.ReadAll(inv.Stdin)
			<-release
			io.WriteString(inv.Stdout, "done\n")
			return 3
		}
		cfg := Config{Dir: t.TempDir(), Handler: h}
		if early {
			testknobs.Weaken(&cfg, testknobs.ServerEarlyReply)
		}
		s := mustStart(t, cfg)
		type reply struct {
			status int
			out    string
			err    error
		}
		got := make(chan reply, 1)
		go func() {
			var out strings.Builder
			status, err := Run(cfg.Dir, &Request{Args: []string{"x"}, Cwd: "/"}, strings.NewReader("put a = b\n"), &out, io.Discard)
			got <- reply{status, out.String(), err}
		}()
		select {
		case r := <-got:
			if !early {
				t.Fatalf("the client was told %+v before the handler returned", r)
			}
			if r.status != 0 || r.out != "" {
				t.Errorf("server-early-reply: the client got %+v, want status 0 and no output", r)
			}
		case <-time.After(300 * time.Millisecond):
			if early {
				t.Fatal("server-early-reply: the client was not told before the handler returned")
			}
			close(release)
			if r := <-got; r.err != nil || r.status != 3 || r.out != "done\n" {
				t.Errorf("after the handler returned the client got %+v, want status 3 and its output", r)
			}
		}
		if early {
			close(release)
		}
		s.Stop(5 * time.Second)
	}
}
