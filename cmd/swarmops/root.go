package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// rootCmd builds the command tree for one invocation.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "swarmops",
		Short:         "A crash-safe changeset store shared by many agent processes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.help(cmd)
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeFlag, "store", "", "store directory (default: $SWARMOPS_STORE, else ./.swarmops)")
	pf.BoolVar(&a.jsonFlag, "json", false, "print one JSON envelope on stdout (also SWARMOPS_JSON=1)")
	pf.DurationVar(&a.lockTimeout, "lock-timeout", 10*time.Second, "how long to wait for the writer lock before E_BUSY")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%s: %w", c.CommandPath(), err)
	})
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { a.help(c) })
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Show usage and the error table",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usagef("help: unknown command %q", strings.Join(args, " "))
			}
			a.help(target)
			return nil
		},
	})
	// Each command lives in a cmd_*.go file of its group; adding one is
	// that file and one line here.
	root.AddCommand(
		a.initCmd(),
		a.commitCmd(),
		a.landCmd(),
		a.refCmd(),
		a.logCmd(),
		a.showCmd(),
		a.catCmd(),
		a.lsCmd(),
		a.diffCmd(),
		a.checkoutCmd(),
		a.infoCmd(),
		a.verifyCmd(),
		a.recoverCmd(),
	)
	return root
}

// help records the usage of c (and, for the root, the error table) as the
// command's result, so --json gets it in the envelope too.
func (a *app) help(c *cobra.Command) {
	usage := c.UsageString()
	if c.Long != "" {
		usage = c.Long + "\n\n" + usage
	}
	data := map[string]any{"command": c.CommandPath(), "usage": usage}
	if !c.HasParent() {
		data["errors"] = errorTable()
	}
	a.ok(data, func(w io.Writer) {
		fmt.Fprint(w, usage)
		if !c.HasParent() {
			fmt.Fprintln(w, "\nErrors (code, exit status, retryable):")
			writeErrorTable(w)
			fmt.Fprintln(w, "\nThe change-list format, the JSON envelope and every command: docs/cli.md.")
		}
	})
}
