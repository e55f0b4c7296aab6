package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
)

// leakedLayer matches the names of the packages behind a message: the
// store's sentinels ("core: not found"), the object and file layers, and the
// parsers the flags use. None of them belongs in what a user reads.
const leakedLayer = `core: |objects: |vfs: |index: |strconv\.|time: invalid`

// The first hour: what a new user meets, done the way git and jj users
// expect. Each container starts from an empty workspace.

var _ = Describe("the first hour: a missing store", func() {
	var e *env
	BeforeEach(func() { e = newEnv() })
	// realRoot is the workspace as the binary sees its working
	// directory, with any symlink in the temp path resolved.
	realRoot := func() string {
		GinkgoHelper()
		p, err := filepath.EvalSymlinks(e.root)
		Expect(err).NotTo(HaveOccurred())
		return p
	}
	It("is E_NOT_STORE naming the default directory it tried, with a hint to init or to set SWARMOPS_STORE or --store", func() {
		e.store = ""
		r := e.run("", "log")
		Expect(r.Exit).To(Equal(kindNotStore.Exit))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(ContainSubstring(filepath.Join(realRoot(), ".swarmops")))
		Expect(r.Stderr).To(ContainSubstring("it does not exist"))
		Expect(r.Stderr).To(ContainSubstring("neither --store nor SWARMOPS_STORE is set"))
		Expect(r.Stderr).To(ContainSubstring("\nhint: run 'swarmops init' to create one there, or point --store or SWARMOPS_STORE at an existing store\n"))
		er := e.run("", "log", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_NOT_STORE"), HaveKeyWithValue("store", ".swarmops"),
			HaveKeyWithValue("hint", ContainSubstring("swarmops init"))))
	})
	It("says the directory came from --store or SWARMOPS_STORE when it did", func() {
		e.store = ""
		r := e.run("", "info", "--store", "elsewhere")
		Expect(r.Stderr).To(ContainSubstring(filepath.Join(realRoot(), "elsewhere")))
		Expect(r.Stderr).To(ContainSubstring("(from --store elsewhere)"))
		Expect(r.Stderr).To(ContainSubstring("run 'swarmops init --store elsewhere'"))
		e.extra = []string{"SWARMOPS_STORE=fromenv"}
		Expect(e.run("", "info").Stderr).To(ContainSubstring("(from SWARMOPS_STORE=fromenv)"))
	})
	It("does not suggest init where init would refuse, and init there says why", func() {
		e.write("full/x", "x")
		er := e.run("", "info", "--store", filepath.Join(e.root, "full"), "--json").Err()
		Expect(er).To(HaveKeyWithValue("code", "E_NOT_STORE"))
		Expect(er["message"]).To(ContainSubstring("the directory holds no store"))
		Expect(er["hint"]).NotTo(ContainSubstring("to create one there"))
		er = e.run("", "init", "--store", filepath.Join(e.root, "full"), "--json").Err()
		Expect(er).To(HaveKeyWithValue("code", "E_EXISTS"))
		Expect(er["message"]).To(ContainSubstring("the directory is not empty"))
	})
})

var _ = Describe("the first hour: log on a fresh store", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
	})
	It("prints nothing and exits 0, as git and jj do for an empty history", func() {
		r := e.run("", "log")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(BeEmpty())
		Expect(e.ok("", "log")).To(BeEmpty())
		Expect(e.run("", "log", "--json").Stdout).To(ContainSubstring(`"data":[]`))
	})
	It("is still E_NOT_FOUND for a REV the user names", func() {
		Expect(e.run("", "log", "main", "--json").Err()).To(SatisfyAll(
			HaveKeyWithValue("code", "E_NOT_FOUND"), HaveKeyWithValue("rev", "main")))
		Expect(e.run("", "log", "nosuch", "--json").Err()).To(HaveKeyWithValue("code", "E_NOT_FOUND"))
	})
})

var _ = Describe("the first hour: typos", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put a = \"1\"\n", "--advance", "main")
	})
	DescribeTable("get a did-you-mean hint, and the suggestions as a list in JSON",
		func(code, hint string, suggestions []any, args ...string) {
			er := e.run("", append(args, "--json")...).Err()
			Expect(er).To(HaveKeyWithValue("code", code))
			Expect(er).To(HaveKeyWithValue("hint", hint))
			Expect(er).To(HaveKeyWithValue("suggestions", suggestions))
			r := e.run("", args...)
			Expect(r.Stdout).To(BeEmpty())
			Expect(r.Stderr).To(ContainSubstring("\nhint: " + hint + "\n"))
		},
		Entry("an unknown command", "E_USAGE", `did you mean "commit"?`, []any{"commit"}, "comit"),
		Entry("an unknown subcommand", "E_USAGE", `did you mean "get"?`, []any{"get"}, "ref", "gte", "main"),
		Entry("git's verbs, which are import and export here", "E_USAGE", `did you mean one of "export", "import", "init", "cat", "gc"?`,
			[]any{"export", "import", "init", "cat", "gc"}, "git", "import"),
		Entry("an unknown command in help", "E_USAGE", `did you mean "land"?`, []any{"land"}, "help", "lnad"),
		Entry("an unknown flag", "E_USAGE", "did you mean --max-count?", []any{"max-count"}, "log", "--max-cont", "3"),
		Entry("an unknown ref", "E_NOT_FOUND", `did you mean "main"?`, []any{"main"}, "ref", "get", "mian"),
		Entry("an unknown ref as a revision", "E_NOT_FOUND", `did you mean "main"?`, []any{"main"}, "log", "mian~1"),
		Entry("an unknown ref to land onto", "E_NOT_FOUND", `did you mean "main"?`, []any{"main"}, "land", "main", "--onto", "mian"),
	)
	It("suggests nothing when nothing is close", func() {
		er := e.run("", "ref", "get", "zzzzzz", "--json").Err()
		Expect(er).NotTo(HaveKey("hint"))
		Expect(er).NotTo(HaveKey("suggestions"))
		Expect(e.run("", "ref", "get", "zzzzzz").Stderr).NotTo(ContainSubstring("hint:"))
	})
})

var _ = Describe("the first hour: E_NOT_FOUND", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put src/b.go = \"1\"\n", "--advance", "main")
	})
	DescribeTable("names what was missing in a field of its own and in the user's terms",
		func(msg string, fields gstruct.Keys, args ...string) {
			er := e.run("", append(args, "--json")...).Err()
			Expect(er).To(HaveKeyWithValue("code", "E_NOT_FOUND"))
			Expect(er).To(gstruct.MatchKeys(gstruct.IgnoreExtras, fields))
			Expect(er["message"]).To(Equal(msg))
		},
		Entry("a ref", `ref "nosuch" does not exist`, gstruct.Keys{"ref": Equal("nosuch")}, "ref", "get", "nosuch"),
		Entry("a ref without a log", `ref "nosuch" does not exist`, gstruct.Keys{"ref": Equal("nosuch")}, "ref", "log", "nosuch"),
		Entry("a ref to delete", `ref "nosuch" does not exist`, gstruct.Keys{"ref": Equal("nosuch")}, "ref", "delete", "nosuch"),
		Entry("a revision", `no ref named "nosuch"`, gstruct.Keys{"rev": Equal("nosuch")}, "show", "nosuch"),
		Entry("an id prefix", `no ref or changeset id matches "abc1"`, gstruct.Keys{"rev": Equal("abc1")}, "show", "abc1"),
		Entry("a walk past the first changeset", `revision "main~5" goes back past the first changeset`,
			gstruct.Keys{"rev": Equal("main~5")}, "show", "main~5"),
		Entry("a path", `path "src/a.go" does not exist in main`,
			gstruct.Keys{"path": Equal("src/a.go"), "rev": Equal("main")}, "cat", "main:src/a.go"),
		Entry("a directory", `path "lib" does not exist in main`,
			gstruct.Keys{"path": Equal("lib"), "rev": Equal("main")}, "ls", "main:lib"),
	)
})

var _ = Describe("the first hour: messages", func() {
	var e *env
	BeforeEach(func() { e = newEnv() })
	DescribeTable("messages say what was wrong without naming the layers behind it",
		func(setup func(e *env), code string, args ...string) {
			e.ok("", "init")
			e.commit("put dir/f = \"1\"\n", "--advance", "main")
			if setup != nil {
				setup(e)
			}
			er := e.run("", append(args, "--json")...).Err()
			Expect(er).To(HaveKeyWithValue("code", code))
			Expect(er["message"]).NotTo(MatchRegexp(leakedLayer))
			Expect(e.run("", args...).Stderr).NotTo(MatchRegexp(leakedLayer))
		},
		Entry("a missing revision", nil, "E_NOT_FOUND", "show", "nosuch"),
		Entry("a missing full id", nil, "E_NOT_FOUND", "show", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
		Entry("a missing path", nil, "E_NOT_FOUND", "cat", "main:nope"),
		Entry("cat of a directory", nil, "E_USAGE", "cat", "main:dir"),
		Entry("ls of a file", nil, "E_USAGE", "ls", "main:dir/f"),
		Entry("a count that is not a number", nil, "E_USAGE", "log", "-n", "x"),
		Entry("a duration that is not one", nil, "E_USAGE", "info", "--lock-timeout", "soon"),
		Entry("init over a store", nil, "E_EXISTS", "init"),
		Entry("a store that is not one", func(e *env) { e.write("junk/x", "x"); e.store = filepath.Join(e.root, "junk") },
			"E_NOT_STORE", "info"),
		Entry("a missing change list", nil, "E_USAGE", "commit", "-F", "nofile"),
	)
})

var _ = Describe("the first hour: a non-ASCII ref name", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
	})
	It("is reported with the character it holds and its byte offset", func() {
		er := e.run("", "ref", "create", "añb", "main", "--json").Err()
		Expect(er).To(HaveKeyWithValue("code", "E_USAGE"))
		Expect(er["message"]).To(ContainSubstring(`contains 'ñ' (U+00F1) at byte 1`))
	})
	It("is reported as a hex byte where it is not UTF-8", func() {
		er := e.run("", "ref", "create", "a\xffb", "main", "--json").Err()
		Expect(er["message"]).To(ContainSubstring("contains the byte 0xff (not UTF-8) at byte 1"))
	})
})

var _ = Describe("the first hour: streams", func() {
	var e *env
	BeforeEach(func() { e = newEnv() })
	It("keeps human errors on stderr and JSON envelopes on stdout, hints included", func() {
		e.store = ""
		r := e.run("", "comit")
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(ContainSubstring("hint:"))
		r = e.run("", "comit", "--json")
		Expect(r.Stderr).To(BeEmpty())
		Expect(r.Err()).To(HaveKey("hint"))
		_, err := os.Stat(filepath.Join(e.root, ".swarmops"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "a failed command created the default store")
	})
})
