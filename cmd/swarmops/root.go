package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandOrder lists the top-level commands in the order help shows them.
// Each command lives in a cmd_*.go file of its group; adding one is that
// file, its name here and one line in commandTable.
var commandOrder = []string{"init", "commit", "land", "ref", "log", "show", "cat", "ls", "diff", "checkout",
	"status", "update", "resolve", "info", "verify", "recover", "gc", "serve", "mcp", "hook", "export", "import", "op", "undo", "watch"}

// commandTable maps each top-level command's name to its constructor.
// It is filled by init: the constructors reach rootCmd, which reads it.
var commandTable map[string]func(*app) *cobra.Command

func init() {
	commandTable = map[string]func(*app) *cobra.Command{
		"init": (*app).initCmd, "commit": (*app).commitCmd, "land": (*app).landCmd, "ref": (*app).refCmd,
		"log": (*app).logCmd, "show": (*app).showCmd, "cat": (*app).catCmd, "ls": (*app).lsCmd,
		"diff": (*app).diffCmd, "checkout": (*app).checkoutCmd, "status": (*app).statusCmd, "update": (*app).updateCmd,
		"resolve": (*app).resolveCmd, "info": (*app).infoCmd,
		"verify": (*app).verifyCmd, "recover": (*app).recoverCmd, "gc": (*app).gcCmd, "serve": (*app).serveCmd, "mcp": (*app).mcpCmd,
		"hook": (*app).hookCmd, "export": (*app).exportCmd, "import": (*app).importCmd, "op": (*app).opCmd,
		"undo": (*app).undoCmd, "watch": (*app).watchCmd,
	}
}

// rootCmd builds the command tree for one invocation of the command line
// only: the whole tree, or just the command it names.
func (a *app) rootCmd(only []string) *cobra.Command {
	root := &cobra.Command{
		Use:           "swarmops",
		Short:         "A crash-safe changeset store shared by many agent processes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noSubcommand,
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
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { a.help(c) })
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Show usage and the error table",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil {
				return usagef("help: unknown command %q", strings.Join(args, " "))
			}
			if len(rest) > 0 {
				return unknownCommand(target, rest[0])
			}
			a.help(target)
			return nil
		},
	})
	// A command line that names a command exactly needs only that
	// command's subtree: building the other twenty costs more than most
	// commands' own work under a server. Parsing, help and errors of the
	// named command are the same either way (TestCommandTableNamesItsCommands).
	if build, ok := commandTable[leadingCommand(only)]; ok {
		root.AddCommand(namedArgs(build(a)))
		return root
	}
	for _, name := range commandOrder {
		root.AddCommand(namedArgs(commandTable[name](a)))
	}
	return root
}

// namedArgs makes the argument checks of cmd and its subcommands name the
// command and its usage line: cobra's own says only "accepts 2 arg(s),
// received 1".
func namedArgs(cmd *cobra.Command) *cobra.Command {
	for _, sub := range cmd.Commands() {
		namedArgs(sub)
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			if _, ours := err.(*cliError); err == nil || ours {
				return err
			}
			return usagef("%s: %v (usage: %s)", c.CommandPath(), err, c.UseLine())
		}
	}
	return cmd
}

// leadingCommand returns the command a command line names when nothing
// but the global flags precedes it, and "" for any other line (an unknown
// flag, "--"), which cobra then parses against the whole tree.
func leadingCommand(args []string) string {
	if i := leadingIndex(args); i >= 0 {
		return args[i]
	}
	return ""
}

// leadingIndex is leadingCommand's position in args, or -1.
func leadingIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--store" || a == "--lock-timeout":
			i++ // its value follows
		case a == "--json" || strings.HasPrefix(a, "--json=") || strings.HasPrefix(a, "--store=") ||
			strings.HasPrefix(a, "--lock-timeout="):
		case strings.HasPrefix(a, "-"):
			return -1
		default:
			return i
		}
	}
	return -1
}

// runDirect runs a command line that names a top-level command without
// subcommands (commit, log, cat, …) the way cobra's Execute does, minus
// the work Execute spends on every call for what such a line never needs:
// the shell-completion command, the help command and a second search of
// the tree. Under a server that work was a tenth of a commit's CPU (of
// the quarter cobra took in all).
// It parses and validates with cobra's own functions, in Execute's order;
// only when all of them pass does it run the command. Anything else (a
// parse or validation error, -h, a command with subcommands) reports
// ran false with nothing run, and the caller gives the line to Execute on
// a fresh tree, which reports it exactly as before
// (TestDirectRunMatchesExecute).
func runDirect(root *cobra.Command, args []string) (err error, ran bool) {
	i := leadingIndex(args)
	if i < 0 {
		return nil, false
	}
	var cmd *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == args[i] {
			cmd = c
		}
	}
	if cmd == nil || cmd.HasSubCommands() || cmd.RunE == nil || cmd.DisableFlagParsing || cmd.Deprecated != "" {
		return nil, false
	}
	rest := append(append([]string(nil), args[:i]...), args[i+1:]...)
	// No help flag is defined here (Execute adds it), so -h and --help
	// fail to parse and go to Execute.
	if cmd.ParseFlags(rest) != nil {
		return nil, false
	}
	pos := cmd.Flags().Args()
	if cmd.ValidateArgs(pos) != nil || cmd.ValidateRequiredFlags() != nil || cmd.ValidateFlagGroups() != nil {
		return nil, false
	}
	cmd.SetContext(context.Background())
	err = cmd.RunE(cmd, pos)
	if errors.Is(err, pflag.ErrHelp) {
		cmd.HelpFunc()(cmd, args)
		return nil, true
	}
	return err, true
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

// noSubcommand is the argument check of a command that has subcommands: an
// argument there is a mistyped subcommand.
func noSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownCommand(c, args[0])
}

// unknownCommand is E_USAGE for a subcommand c lacks, with the close ones
// as a "did you mean" hint.
func unknownCommand(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	return usageHint(suggestionsFor(c, name), quoted, "unknown command %q for %q", name, c.CommandPath())
}

// suggestionsFor is cobra's SuggestionsFor with the commands that name
// name in SuggestFor (export and import for "git") first: they are what
// was meant, not merely close in spelling.
func suggestionsFor(c *cobra.Command, name string) []string {
	var named, close []string
	for _, s := range c.SuggestionsFor(name) {
		if sub, _, err := c.Find([]string{s}); err == nil && slices.Contains(sub.SuggestFor, name) {
			named = append(named, s)
		} else {
			close = append(close, s)
		}
	}
	return append(named, close...)
}

// flagError says what was wrong with a flag in the user's terms: an unknown
// flag gets a "did you mean" hint, and a bad value says what the flag wants
// instead of the parser's error (strconv.ParseInt: ...).
func flagError(c *cobra.Command, err error) error {
	var (
		unknown *pflag.NotExistError
		invalid *pflag.InvalidValueError
	)
	switch {
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + "/" + name
		}
		return usagef("%s: %s %q: want %s", c.CommandPath(), name, invalid.GetValue(), flagWants(f.Value.Type()))
	case errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() == "":
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		return usageHint(similar(unknown.GetSpecifiedName(), names), func(s string) string { return "--" + s },
			"%s: %w", c.CommandPath(), err)
	}
	return usagef("%s: %w", c.CommandPath(), err)
}

// flagWants names what a flag of a pflag value type accepts.
func flagWants(typ string) string {
	switch typ {
	case "int":
		return "a whole number"
	case "duration":
		return "a duration such as 250ms, 10s or 1m"
	case "bool":
		return "true or false"
	case "uint", "uint64":
		return "a whole number, 0 or more"
	}
	return "a " + typ
}
