package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
)

// The fixture every spec starts from: a store whose main holds two
// changesets.
//
//	m1: put a.txt, dir/b.txt        (main~1)
//	m2: put c.txt, delete a.txt     (main)
const (
	list1 = "put a.txt = \"alpha\\n\"\nput dir/b.txt = \"beta\\n\"\n"
	list2 = "put c.txt = \"gamma\\n\"\ndelete a.txt\n"
)

// The spec tree is one container because every spec starts from the
// fixture its BeforeEach builds (m1 and m2 on main); its length is the
// number of specs, each of them short.
var _ = Describe("swarmops", func() {
	var (
		e      *env
		m1, m2 string
	)
	BeforeEach(func() {
		e = newStoreEnv()
		m1 = e.commit(list1, "--advance", "main", "-m", "first", "--agent", "tester")
		m2 = e.commit(list2, "--advance", "main", "-m", "second", "--agent", "tester")
	})

	Describe("each command's --json output", func() {
		It("init", func() {
			f := newEnv()
			expectGolden("init", f.run("", "init", "--json"), f.root)
		})
		It("commit", func() {
			r := e.run("put new.txt = \"n\\n\"\n", "commit", "-F", "-", "--advance", "main", "--json")
			expectGolden("commit", r, e.root)
		})
		It("land (fast-forward, merge, no-op)", func() {
			side := e.commit("put side.txt = \"s\\n\"\n", "--parent", "main")
			expectGolden("land-ff", e.run("", "land", side, "--onto", "main", "--json"), e.root)
			other := e.commit("put other.txt = \"o\\n\"\n", "--parent", "main~1")
			expectGolden("land-merge", e.run("", "land", other, "--onto", "main", "--json"), e.root)
			expectGolden("land-noop", e.run("", "land", other, "--onto", "main", "--json"), e.root)
		})
		It("ref get, create, set, delete, list, log", func() {
			expectGolden("ref-get", e.run("", "ref", "get", "main", "--json"), e.root)
			expectGolden("ref-create", e.run("", "ref", "create", "topic", "main~1", "--json"), e.root)
			expectGolden("ref-set", e.run("", "ref", "set", "topic", m2, "--expect", m1, "--json"), e.root)
			expectGolden("ref-list", e.run("", "ref", "list", "--json"), e.root)
			expectGolden("ref-log", e.run("", "ref", "log", "topic", "--json"), e.root)
			expectGolden("ref-delete", e.run("", "ref", "delete", "topic", "--json"), e.root)
		})
		It("log, show, cat, ls, diff", func() {
			expectGolden("log", e.run("", "log", "--json"), e.root)
			expectGolden("show", e.run("", "show", "main", "--json"), e.root)
			expectGolden("cat", e.run("", "cat", "main:dir/b.txt", "--json"), e.root)
			expectGolden("ls", e.run("", "ls", "main", "--json"), e.root)
			expectGolden("diff", e.run("", "diff", "main~1", "main", "--json"), e.root)
		})
		It("checkout, info, verify, recover, help", func() {
			expectGolden("checkout", e.run("", "checkout", "main", filepath.Join(e.root, "wt"), "--json"), e.root)
			expectGolden("info", e.run("", "info", "--json"), e.root)
			expectGolden("verify", e.run("", "verify", "--deep", "--json"), e.root)
			expectGolden("recover", e.run("", "recover", "--json"), e.root)
			expectGolden("help", e.run("", "help", "--json"), e.root)
		})
		It("errors", func() {
			expectGolden("error-usage", e.run("", "log", "--frob", "--json"), e.root)
			expectGolden("error-not-found", e.run("", "show", "nosuchref", "--json"), e.root)
			expectGolden("error-conflict", e.run("", "ref", "set", "main", m1, "--expect", m1, "--json"), e.root)
			expectGolden("error-not-store", e.run("", "info", "--store", e.root, "--json"), e.root)
			expectGolden("error-exists", e.run("", "init", "--json"), e.root)
			x := e.commit("put dir/b.txt = \"beta by x\\n\"\n", "--parent", "main")
			e.commit("put dir/b.txt = \"beta by main\\n\"\n", "--advance", "main")
			expectGolden("error-merge-conflict", e.run("", "land", x, "--onto", "main", "--json"), e.root)
		})
	})

	Describe("commit", func() {
		It("reads put < FILE, exec and delete from a change-list file and prints only the id", func() {
			e.write("src/tool.sh", "#!/bin/sh\necho hi\n")
			list := e.write("changes.txt", "# from a file\nput readme = \"r\\n\"\nexec bin/tool < src/tool.sh\ndelete c.txt\n")
			r := e.run("", "commit", "-F", list, "--advance", "main")
			Expect(r.Exit).To(Equal(0), r.Stderr)
			Expect(strings.TrimSpace(r.Stdout)).To(MatchRegexp(`^[0-9a-f]{64}$`))
			Expect(e.run("", "cat", "main:bin/tool").Stdout).To(Equal("#!/bin/sh\necho hi\n"))
			ls := e.ok("", "ls", "main:bin").([]any)
			Expect(ls).To(ConsistOf(HaveKeyWithValue("mode", "100755")))
			Expect(e.run("", "cat", "main:c.txt").Exit).To(Equal(kindNotFound.Exit))
		})
		It("snapshots a directory against the first parent: adds, modifies, deletes, keeps the rest", func() {
			tree := e.writeTree("tree", map[string]string{
				"c.txt":     "gamma\n", // unchanged
				"dir/b.txt": "BETA\n",  // modified
				"new/n.txt": "n\n",     // added; a.txt is already gone; nothing else deleted
			})
			d := e.ok("", "commit", "--dir", tree, "--advance", "main").(map[string]any)
			Expect(d["changes"]).To(BeEquivalentTo(2))
			diff := e.ok("", "diff", "main~1", "main").([]any)
			Expect(diff).To(HaveLen(2))
			Expect(diff[0]).To(HaveKeyWithValue("path", "dir/b.txt"))
			Expect(diff[0]).To(HaveKeyWithValue("op", "modify"))
			Expect(diff[1]).To(HaveKeyWithValue("op", "add"))
			Expect(os.Remove(filepath.Join(tree, "c.txt"))).To(Succeed())
			d = e.ok("", "commit", "--dir", tree, "--advance", "main").(map[string]any)
			Expect(d["changes"]).To(BeEquivalentTo(1))
			Expect(e.ok("", "diff", "main~1", "main")).To(ConsistOf(HaveKeyWithValue("op", "delete")))
		})
		It("records several parents in order, and --advance with a stale parent is E_CONFLICT with the current value", func() {
			id := e.commit("put m = \"m\\n\"\n", "--parent", "main", "--parent", m1)
			show := e.ok("", "show", id).(map[string]any)
			Expect(show["parents"]).To(Equal([]any{m2, m1}))
			before := e.journalState()
			r := e.run("put x = \"x\\n\"\n", "commit", "-F", "-", "--parent", m1, "--advance", "main", "--json")
			Expect(r.Err()).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("current", m2)))
			Expect(e.journalState()).To(Equal(before))
		})
	})

	Describe("revisions", func() {
		It("resolves full ids, prefixes of 4+, refs and REV~N", func() {
			for _, rev := range []string{m1, m1[:4], m1[:10], "main~1", "main~"} {
				Expect(e.ok("", "show", rev)).To(HaveKeyWithValue("id", m1), rev)
			}
			Expect(e.ok("", "show", "main~0")).To(HaveKeyWithValue("id", m2))
		})
		It("lists the candidates of an ambiguous prefix as E_AMBIGUOUS", func() {
			s, err := core.Open(e.store, core.Options{})
			Expect(err).NotTo(HaveOccurred())
			seen := map[string]string{}
			var prefix string
			for i := 0; i < 5000 && prefix == ""; i++ {
				id, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "f", Data: []byte(fmt.Sprint(i))}}})
				Expect(err).NotTo(HaveOccurred())
				p := id.String()[:4]
				if _, dup := seen[p]; dup {
					prefix = p
				}
				seen[p] = id.String()
			}
			Expect(s.Close()).To(Succeed())
			Expect(prefix).NotTo(BeEmpty(), "no two changesets of 5000 share 4 hex digits")
			r := e.run("", "show", prefix, "--json")
			er := r.Err()
			Expect(er).To(HaveKeyWithValue("code", "E_AMBIGUOUS"))
			Expect(er["candidates"]).To(ContainElement(seen[prefix]))
			Expect(len(er["candidates"].([]any))).To(BeNumerically(">=", 2))
		})
	})

	// One container of tables of refused inputs: its length is the rows.
	Describe("bad input is refused with a clear, typed error and nothing written", func() {
		DescribeTable("arguments",
			func(code, msg string, args ...string) {
				before := e.journalState()
				r := e.run("put z = \"z\\n\"\n", append(args, "--json")...)
				er := r.Err()
				Expect(er).To(HaveKeyWithValue("code", code))
				Expect(er["message"]).To(ContainSubstring(msg))
				Expect(e.journalState()).To(Equal(before))
			},
			Entry("an unknown flag", "E_USAGE", "unknown flag: --nope", "commit", "-F", "-", "--nope"),
			Entry("an unknown command", "E_USAGE", "unknown command", "frobnicate"),
			Entry("a missing argument", "E_USAGE", "accepts 1 arg", "show"),
			Entry("a malformed revision", "E_USAGE", "not a count", "show", "main~x"),
			Entry("a malformed id", "E_USAGE", "not an id or a ref name", "show", "12 34"),
			Entry("a malformed --parent", "E_USAGE", "--parent", "commit", "-F", "-", "--parent", "a..b~~"),
			Entry("a revision that does not exist", "E_NOT_FOUND", `no ref or changeset id matches "deadbeef"`, "show", "deadbeef"),
			Entry("a ref that does not exist", "E_NOT_FOUND", "nosuch", "log", "nosuch"),
			Entry("a path that does not exist", "E_NOT_FOUND", "nope.txt", "cat", "main:nope.txt"),
			Entry("a path with ..", "E_USAGE", `".." component`, "cat", "main:dir/../a.txt"),
			Entry("an absolute path", "E_USAGE", "is absolute", "cat", "main:/etc/passwd"),
			Entry("an empty path", "E_USAGE", "empty path", "cat", "main:"),
			Entry("cat without a path", "E_USAGE", "want REV:PATH", "cat", "main"),
			Entry("a bad ref name", "E_USAGE", "ref name", "ref", "create", "bad..name", "main"),
			Entry("a negative -n", "E_USAGE", "-n -1", "log", "-n", "-1"),
			Entry("commit with neither -F nor --dir outside a work tree", "E_USAGE", "run it inside a work tree", "commit"),
			Entry("ref set without --expect", "E_USAGE", "--expect OLD is required", "ref", "set", "main", "main~1"),
			Entry("land without --onto", "E_USAGE", "--onto REF is required", "land", "main~1"),
			Entry("a zero --lock-timeout", "E_USAGE", "--lock-timeout 0s", "info", "--lock-timeout", "0s"),
			Entry("a malformed --lock-timeout", "E_USAGE", `--lock-timeout "soon": want a duration`, "info", "--lock-timeout", "soon"),
		)

		DescribeTable("change lists: the message names line and column",
			func(list, msg string) {
				before := e.journalState()
				r := e.run(list, "commit", "-F", "-", "--advance", "main", "--json")
				er := r.Err()
				Expect(er).To(HaveKeyWithValue("code", "E_USAGE"))
				Expect(er["message"]).To(ContainSubstring(msg))
				Expect(e.journalState()).To(Equal(before))
			},
			Entry("a syntax error", "put ok = \"1\"\nput broken \"x\"\n", "<stdin>:2:12: expected '<' or '='"),
			Entry("a path with ..", "put a/../b = \"1\"\n", "<stdin>:1:5: path \"a/../b\""),
			Entry("an absolute path", "delete /x\n", "<stdin>:1:8: path \"/x\" is absolute"),
			Entry("an empty path", "put \"\" = \"1\"\n", "<stdin>:1:5: empty path"),
			Entry("a NUL byte in a path", "put \"a\\0b\" = \"1\"\n", "<stdin>:1:5: path \"a\\x00b\" contains a NUL byte"),
			Entry("an unterminated string", "put a = \"1\n", "<stdin>:1:9: unterminated"),
		)

		It("refuses a directory where a file is expected", func() {
			Expect(os.MkdirAll(filepath.Join(e.root, "adir"), 0o755)).To(Succeed())
			before := e.journalState()
			er := e.run("put x < adir\n", "commit", "-F", "-", "--advance", "main", "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_USAGE"))
			Expect(er["message"]).To(ContainSubstring(`<stdin>:1: put x: source "adir": is a directory`))
			er = e.run("", "commit", "-F", filepath.Join(e.root, "adir"), "--json").Err()
			Expect(er["message"]).To(ContainSubstring("is a directory"))
			file := e.write("afile", "x")
			er = e.run("", "checkout", "main", file, "--json").Err()
			Expect(er["message"]).To(ContainSubstring("is a file where a directory is expected"))
			er = e.run("", "commit", "--dir", file, "--json").Err()
			Expect(er["message"]).To(ContainSubstring("is a file where a directory is expected"))
			Expect(e.journalState()).To(Equal(before))
		})

		It("refuses a store directory that is not a store, and writes nothing into it", func() {
			dir := filepath.Join(e.root, "notastore")
			Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			e.write("notastore/hello.txt", "hi")
			for _, args := range [][]string{{"info"}, {"log"}, {"verify"}, {"recover"}} {
				er := e.run("", append(args, "--store", dir, "--json")...).Err()
				Expect(er).To(HaveKeyWithValue("code", "E_NOT_STORE"), "%v", args)
			}
			er := e.run("put a = \"1\"\n", "commit", "-F", "-", "--store", dir, "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_NOT_STORE"))
			ents, err := os.ReadDir(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(ents).To(HaveLen(1))
			er = e.run("", "init", "--store", dir, "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_EXISTS"))
		})

		It("refuses malformed environment knobs by name", func() {
			e.extra = []string{"SWARMOPS_JSON=maybe"}
			r := e.run("", "info")
			Expect(r.Exit).To(Equal(kindUsage.Exit))
			Expect(r.Stderr).To(ContainSubstring(`SWARMOPS_JSON="maybe"`))
			e.extra = []string{"SWARMOPS_TEST_CRASH_AT=soon"}
			er := e.run("", "info", "--json").Err()
			Expect(er["message"]).To(ContainSubstring(`SWARMOPS_TEST_CRASH_AT="soon"`))
		})
	})

	Describe("output", func() {
		It("prints human text by default and JSON with SWARMOPS_JSON=1", func() {
			Expect(e.run("", "ref", "get", "main").Stdout).To(Equal(m2 + "\n"))
			e.extra = []string{"SWARMOPS_JSON=1"}
			Expect(e.run("", "ref", "get", "main").Data()).To(HaveKeyWithValue("id", m2))
		})
		It("writes a human error to stderr with its code, and nothing to stdout", func() {
			r := e.run("", "show", "nosuchref")
			Expect(r.Exit).To(Equal(kindNotFound.Exit))
			Expect(r.Stdout).To(BeEmpty())
			Expect(r.Stderr).To(HavePrefix("swarmops: E_NOT_FOUND: "))
		})
		It("prints the error table in help", func() {
			r := e.run("", "help")
			Expect(r.Exit).To(Equal(0))
			for _, k := range errorTable() {
				Expect(r.Stdout).To(MatchRegexp(`%s\s+%d\s+%v`, k.Code, k.Exit, k.Retryable))
			}
			Expect(e.run("", "help", "land").Stdout).To(ContainSubstring("--onto"))
			Expect(e.run("", "help", "nosuch", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
			Expect(e.run("", "commit", "--help", "--json").Data()).To(HaveKeyWithValue("command", "swarmops commit"))
		})
	})

	Describe("ref", func() {
		It("moves only by compare-and-swap and keeps a reflog", func() {
			e.ok("", "ref", "create", "t", m1)
			er := e.run("", "ref", "create", "t", m2, "--json").Err()
			Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("current", m1)))
			e.ok("", "ref", "set", "t", m2, "--expect", m1)
			er = e.run("", "ref", "delete", "t", "--expect", m1, "--json").Err()
			Expect(er).To(HaveKeyWithValue("current", m2))
			e.ok("", "ref", "delete", "t", "--expect", m2)
			Expect(e.run("", "ref", "get", "t", "--json").Err()).To(HaveKeyWithValue("code", "E_NOT_FOUND"))
			log := e.ok("", "ref", "log", "t").([]any)
			Expect(log).To(HaveLen(3))
			Expect(log[2]).To(HaveKeyWithValue("new", BeNil()))
		})
	})

	// One container of land's specs, which share the fixture and the
	// two-lander setup of their Context.
	Describe("land", func() {
		It("fast-forwards when the head is the change's parent", func() {
			side := e.commit("put s = \"s\\n\"\n", "--parent", "main")
			d := e.ok("", "land", side, "--onto", "main").(map[string]any)
			Expect(d).To(SatisfyAll(HaveKeyWithValue("changeset", side), HaveKeyWithValue("noop", false)))
			Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", side))
		})
		It("merges onto a moved head, and landing again is a no-op that says so", func() {
			ch := e.commit("put dir/new.txt = \"new\\n\"\n", "--parent", m1)
			d := e.ok("", "land", ch[:8], "--onto", "main").(map[string]any)
			Expect(d["noop"]).To(BeFalse())
			merge := d["changeset"].(string)
			Expect(e.ok("", "show", merge)).To(HaveKeyWithValue("parents", []any{m2, ch}))
			Expect(e.run("", "cat", "main:dir/new.txt").Stdout).To(Equal("new\n"))
			Expect(e.run("", "cat", "main:c.txt").Stdout).To(Equal("gamma\n"))
			again := e.ok("", "land", ch, "--onto", "main").(map[string]any)
			Expect(again).To(SatisfyAll(HaveKeyWithValue("noop", true), HaveKeyWithValue("changeset", merge)))
			Expect(e.run("", "land", ch, "--onto", "main").Stdout).To(ContainSubstring("already on main"))
		})
		It("names the landed change and its subject in the merge's message, unless -m says otherwise", func() {
			e.ok("", "ref", "create", "agent/3", m1)
			e.commit("put dir/p.go = \"package p\\n\"\n", "--advance", "agent/3", "-m", "\nfix the parser\n\nIt read past the end.")
			d := e.ok("", "land", "agent/3", "--onto", "main").(map[string]any)
			Expect(e.ok("", "show", d["changeset"].(string))).To(HaveKeyWithValue("message", "land agent/3 onto main: fix the parser"))
			e.commit("put dir/q.go = \"package q\\n\"\n", "--advance", "agent/3", "-m", "add q")
			d = e.ok("", "land", "agent/3", "--onto", "main", "-m", "by hand").(map[string]any)
			Expect(e.ok("", "show", d["changeset"].(string))).To(HaveKeyWithValue("message", "by hand"))
		})
		It("never lands a change twice, even after main undid its effect (the delta hash is in main's history)", func() {
			ch := e.commit("put dir/b.txt = \"v2\\n\"\n", "--parent", "main")
			e.ok("", "land", ch, "--onto", "main")
			e.commit("put dir/b.txt = \"beta\\n\"\n", "--advance", "main") // main reverts it by hand
			head := e.ok("", "ref", "get", "main").(map[string]any)["id"]
			Expect(e.ok("", "land", ch, "--onto", "main")).To(SatisfyAll(HaveKeyWithValue("noop", true), HaveKeyWithValue("changeset", head)))
			Expect(e.run("", "cat", "main:dir/b.txt").Stdout).To(Equal("beta\n"))
		})
		It("never lands a retried twin of a change main already holds, even after main undid it (delta hash)", func() {
			// An agent crashed after committing m2's change, retried, and
			// committed it again: a twin with m2's delta hash.
			twin := e.commit(list2, "--parent", m1, "--agent", "retry")
			e.commit("put a.txt = \"alpha\\n\"\n", "--advance", "main") // main restores a.txt by hand
			head := e.ok("", "ref", "get", "main").(map[string]any)["id"]
			Expect(e.ok("", "land", twin, "--onto", "main")).To(SatisfyAll(HaveKeyWithValue("noop", true), HaveKeyWithValue("changeset", head)))
			Expect(e.run("", "cat", "main:a.txt").Stdout).To(Equal("alpha\n"))
		})
		It("recognises the same change made by another changeset (same delta hash) as already landed", func() {
			twin := e.commit(list2, "--parent", m1, "--agent", "someone-else")
			Expect(twin).NotTo(Equal(m2))
			Expect(e.ok("", "land", twin, "--onto", "main")).To(HaveKeyWithValue("noop", true))
		})
		It("reports a conflict as E_CONFLICT with the paths, and moves nothing", func() {
			ch := e.commit("put c.txt = \"other\\n\"\nput dir/b.txt = \"B\\n\"\n", "--parent", m1)
			e.commit("put dir/b.txt = \"main's\\n\"\n", "--advance", "main")
			before := e.journalState()
			er := e.run("", "land", ch, "--onto", "main", "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_CONFLICT"))
			Expect(er["paths"]).To(Equal([]any{"c.txt", "dir/b.txt"}))
			Expect(e.journalState()).To(Equal(before))
		})

		Context("two processes landing disjoint changes onto main", func() {
			var a, b string
			BeforeEach(func() {
				a = e.commit("put race/a1 = \"1\"\nput race/a2 = \"2\"\nput race/a3 = \"3\"\n", "--parent", "main")
				b = e.commit("put race/b1 = \"1\"\nput race/b2 = \"2\"\nput race/b3 = \"3\"\nput race/b4 = \"4\"\nput race/b5 = \"5\"\n", "--parent", "main")
			})
			// onMainOnce checks main holds both changes' files and each
			// change's delta exactly once in its first-parent history.
			onMainOnce := func() {
				GinkgoHelper()
				log := e.ok("", "log", "main").([]any)
				deltas := map[any]int{}
				for _, c := range log {
					deltas[c.(map[string]any)["delta"]]++
				}
				for _, ch := range []string{a, b} {
					d := e.ok("", "show", ch).(map[string]any)["delta"]
					Expect(deltas[d]).To(Equal(1), "change %s lands %d times on main", ch[:12], deltas[d])
				}
				files := e.ok("", "ls", "main:race").([]any)
				Expect(files).To(HaveLen(8))
			}

			It("makes the loser re-merge only what main gained (forced race)", func() {
				pause := filepath.Join(e.root, "pause")
				c := e.cmd("", "land", b, "--onto", "main", "--json")
				c.Env = append(c.Env, "SWARMOPS_TEST_LAND_PAUSE="+pause)
				loser, err := gexec.Start(c, GinkgoWriter, GinkgoWriter)
				Expect(err).NotTo(HaveOccurred())
				Eventually(pause+".ready", 30*time.Second, 5*time.Millisecond).Should(BeAnExistingFile())
				winner := e.ok("", "land", a, "--onto", "main").(map[string]any)
				Expect(winner).To(HaveKeyWithValue("attempts", BeEquivalentTo(1)))
				e.write("pause.go", "")
				Eventually(loser, 30*time.Second).Should(gexec.Exit(0))
				var env struct{ Data map[string]any }
				Expect(json.Unmarshal(loser.Out.Contents(), &env)).To(Succeed())
				Expect(env.Data["attempts"]).To(BeEquivalentTo(2))
				// main gained a's 3 paths between the loser's attempts; the
				// loser's own 5 paths were not merged again.
				Expect(env.Data["remerged"]).To(Equal([]any{float64(3)}))
				onMainOnce()
			})

			It("lands both exactly once when they really run at once", func() {
				ca := e.cmd("", "land", a, "--onto", "main", "--json")
				cb := e.cmd("", "land", b, "--onto", "main", "--json")
				sa, err := gexec.Start(ca, GinkgoWriter, GinkgoWriter)
				Expect(err).NotTo(HaveOccurred())
				sb, err := gexec.Start(cb, GinkgoWriter, GinkgoWriter)
				Expect(err).NotTo(HaveOccurred())
				Eventually(sa, 30*time.Second).Should(gexec.Exit(0))
				Eventually(sb, 30*time.Second).Should(gexec.Exit(0))
				gains := map[*gexec.Session]int{sa: 5, sb: 3} // what main gains from the other one
				for _, s := range []*gexec.Session{sa, sb} {
					var env struct{ Data map[string]any }
					Expect(json.Unmarshal(s.Out.Contents(), &env)).To(Succeed())
					if rm := env.Data["remerged"].([]any); len(rm) > 0 {
						Expect(rm[0]).To(BeEquivalentTo(gains[s]))
					}
				}
				onMainOnce()
			})
		})
	})

	It("lands N disjoint changes from N processes at once, each exactly once (N from SWARMOPS_TEST_LANDERS, default 4)", func() {
		n := 4
		if v := os.Getenv("SWARMOPS_TEST_LANDERS"); v != "" {
			k, err := strconv.Atoi(v)
			Expect(err == nil && k >= 2).To(BeTrue(), "SWARMOPS_TEST_LANDERS=%q: want an integer >= 2", v)
			n = k
		}
		changes := make([]string, n)
		size := make([]int, n)
		total := 0
		for i := range changes {
			size[i] = i + 1
			total += size[i]
			var list strings.Builder
			for j := 0; j < size[i]; j++ {
				fmt.Fprintf(&list, "put many/c%d-%d = \"%d\"\n", i, j, j)
			}
			changes[i] = e.commit(list.String(), "--parent", "main")
		}
		sessions := make([]*gexec.Session, n)
		for i, ch := range changes {
			s, err := gexec.Start(e.cmd("", "land", ch, "--onto", "main", "--json"), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			sessions[i] = s
		}
		for i, s := range sessions {
			Eventually(s, 60*time.Second).Should(gexec.Exit(0))
			var env struct{ Data map[string]any }
			Expect(json.Unmarshal(s.Out.Contents(), &env)).To(Succeed())
			for _, rm := range env.Data["remerged"].([]any) {
				// A retry re-merges only what others landed, never its own paths.
				Expect(rm).To(BeNumerically("<=", total-size[i]))
			}
		}
		log := e.ok("", "log", "main").([]any)
		deltas := map[any]int{}
		for _, c := range log {
			deltas[c.(map[string]any)["delta"]]++
		}
		for _, ch := range changes {
			Expect(deltas[e.ok("", "show", ch).(map[string]any)["delta"]]).To(Equal(1))
		}
		Expect(e.ok("", "ls", "main:many")).To(HaveLen(total))
	})

	Describe("checkout", func() {
		It("writes the tree, switches a work tree, refuses a non-empty plain directory without --force, and draws no bar when piped", func() {
			wt := filepath.Join(e.root, "wt")
			r := e.run("", "checkout", "main", wt)
			Expect(r.Exit).To(Equal(0), r.Stderr)
			Expect(r.Stderr).To(BeEmpty())
			Expect(filepath.Join(wt, "c.txt")).To(BeARegularFile())
			b, err := os.ReadFile(filepath.Join(wt, "dir", "b.txt"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(Equal("beta\n"))
			// A work tree switches: main~1 has a.txt and no c.txt.
			d := e.ok("", "checkout", "main~1", wt).(map[string]any)
			Expect(d["files"]).To(BeNumerically("==", 1))
			Expect(d["removed"]).To(BeNumerically("==", 1))
			b, _ = os.ReadFile(filepath.Join(wt, "a.txt"))
			Expect(string(b)).To(Equal("alpha\n"))
			Expect(filepath.Join(wt, "c.txt")).NotTo(BeAnExistingFile())
			plain := filepath.Join(e.root, "plain")
			e.write("plain/x.txt", "x")
			er := e.run("", "checkout", "main~1", plain, "--json").Err()
			Expect(er["message"]).To(ContainSubstring("is not empty"))
			e.ok("", "checkout", "main~1", plain, "--force")
			b, _ = os.ReadFile(filepath.Join(plain, "a.txt"))
			Expect(string(b)).To(Equal("alpha\n"))
		})
	})

	Describe("progress", func() {
		It("draws a bar for checkout and verify --deep on a terminal, and none when piped", func() {
			script, err := exec.LookPath("script")
			if err != nil {
				Skip("needs script(1) to give the binary a terminal")
			}
			wt := filepath.Join(e.root, "wt")
			for _, args := range [][]string{{"checkout", "main", wt}, {"verify", "--deep"}} {
				c := exec.Command(script, "-qec", binPath+" "+strings.Join(args, " "), "/dev/null")
				c.Env = append(baseEnv(), "SWARMOPS_STORE="+e.store)
				out, err := c.CombinedOutput()
				Expect(err).NotTo(HaveOccurred(), "%s", out)
				Expect(string(out)).To(MatchRegexp(`%s.*\(\d+/\d+\)`, args[0]), "no bar on a terminal for %v", args)
			}
			r := e.run("", "verify", "--deep")
			Expect(r.Exit).To(Equal(0))
			Expect(r.Stderr).To(BeEmpty())
		})
	})

	Describe("faults", func() {
		It("is E_BUSY, retryable, when the writer lock stays taken", func() {
			l, err := vfs.OS().Lock(filepath.Join(e.store, "LOCK"), time.Second)
			Expect(err).NotTo(HaveOccurred())
			defer l.Unlock()
			before := e.journalState()
			er := e.run("put x = \"x\\n\"\n", "commit", "-F", "-", "--advance", "main", "--lock-timeout", "50ms", "--json").Err()
			Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_BUSY"), HaveKeyWithValue("retryable", true)))
			Expect(e.journalState()).To(Equal(before))
		})
		It("crashes at the Nth filesystem call with SWARMOPS_TEST_CRASH_AT; afterwards the commit is all there or not at all", func() {
			crashed := 0
			for _, n := range []int{2, 6, 12, 24} {
				before := e.ok("", "ref", "get", "main").(map[string]any)["id"]
				e.extra = []string{fmt.Sprintf("SWARMOPS_TEST_CRASH_AT=%d", n)}
				r := e.run(fmt.Sprintf("put crash%d = \"x\"\n", n), "commit", "-F", "-", "--advance", "main", "--json")
				e.extra = nil
				Expect(r.Exit).To(Or(Equal(0), Equal(kindCrashed.Exit)), "crash at %d: %s %s", n, r.Stdout, r.Stderr)
				if r.Exit == kindCrashed.Exit {
					crashed++
					Expect(r.Stdout).To(BeEmpty())
				}
				rr := e.run("", "recover", "--json")
				Expect(rr.Exit).To(Or(Equal(0), Equal(kindRepaired.Exit)), rr.Stdout)
				e.ok("", "verify", "--deep")
				after := e.ok("", "ref", "get", "main").(map[string]any)["id"]
				if after != before {
					Expect(e.run("", "cat", fmt.Sprintf("main:crash%d", n)).Stdout).To(Equal("x"))
				} else {
					Expect(r.Exit).To(Equal(kindCrashed.Exit), "an acknowledged commit is missing")
				}
			}
			Expect(crashed).To(BeNumerically(">", 0), "no run reached its crash point")
		})
		It("cuts a torn tail after a power loss and says so with E_REPAIRED, then finds nothing", func() {
			f, end := e.openSegment()
			// Half-written bytes past the last acknowledged frame, and a
			// state file that did not survive: what a power loss leaves.
			_, err := f.WriteAt([]byte(strings.Repeat("\x07", 300)), end)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.Close()).To(Succeed())
			st := filepath.Join(e.store, "state")
			fi, err := os.Stat(st)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(st, make([]byte, fi.Size()), 0o644)).To(Succeed())
			r := e.run("", "recover", "--json")
			Expect(r.Err()).To(SatisfyAll(HaveKeyWithValue("code", "E_REPAIRED"), HaveKeyWithValue("torn_bytes_cut", BeEquivalentTo(300))))
			expectGolden("recover-repaired", r, e.root)
			Expect(e.run("", "recover").Exit).To(Equal(0))
			Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", m2))
			e.ok("", "verify", "--deep")
		})
		It("finds corruption inside the acknowledged prefix: verify and recover say E_CORRUPT", func() {
			f, end := e.openSegment()
			buf := make([]byte, end)
			_, err := f.ReadAt(buf, 0)
			Expect(err).NotTo(HaveOccurred())
			// Flip one byte in the middle of the last frame.
			off := end - 200
			_, err = f.WriteAt([]byte{buf[off] ^ 0xff}, off)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.Close()).To(Succeed())
			er := e.run("", "verify", "--deep", "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_CORRUPT"))
			er = e.run("", "recover", "--json").Err()
			Expect(er).To(HaveKeyWithValue("code", "E_CORRUPT"))
		})
	})
})
