package main

import (
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
)

// An agent's loop from docs/guide.md: commit its work tree to its branch,
// land the branch on main, update the tree onto main, commit again. After
// the land main holds the branch, so the next commit's --advance is a
// fast-forward of the branch from a value that is not the commit's parent.
var _ = Describe("commit --advance of a branch its parent already holds", func() {
	var (
		e     *env
		wt    string
		first string
	)
	refID := func(name string) string {
		GinkgoHelper()
		return e.ok("", "ref", "get", name).(map[string]any)["id"].(string)
	}
	parentsOf := func(rev string) []any {
		GinkgoHelper()
		return e.ok("", "show", rev).(map[string]any)["parents"].([]any)
	}
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put README.md = \"hello\\n\"\n", "--advance", "main", "-m", "start")
		wt = filepath.Join(e.root, "wt7")
		e.ok("", "checkout", "main", wt)
		e.write("wt7/a.txt", "a\n")
		first = e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "--create", "-m", "first").(map[string]any)["id"].(string)
		e.ok("", "land", "agent/7", "--onto", "main")
		Expect(refID("main")).To(Equal(first), "the land fast-forwards main")
	})

	It("moves the branch to a commit of the tree updated onto main, and leaves main alone", func() {
		other := e.commit("put other.txt = \"x\\n\"\n", "--advance", "main", "-m", "other")
		e.write("wt7/b.txt", "b\n")
		e.ok("", "update", wt, "--onto", "main")
		d := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "--create", "--agent", "agent-7", "-m", "second").(map[string]any)
		second := d["id"].(string)
		Expect(d["parents"]).To(Equal([]any{other}))
		Expect(d["advanced"]).To(Equal("agent/7"))
		Expect(refID("agent/7")).To(Equal(second))
		Expect(refID("main")).To(Equal(other))
		Expect(e.run("", "cat", "agent/7:b.txt").Stdout).To(Equal("b\n"))
		Expect(e.run("", "cat", "agent/7:other.txt").Stdout).To(Equal("x\n"))
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
		log := e.ok("", "ref", "log", "agent/7").([]any)
		last := log[len(log)-1].(map[string]any)
		Expect(last).To(SatisfyAll(HaveKeyWithValue("old", first), HaveKeyWithValue("new", second),
			HaveKeyWithValue("op", "commit"), HaveKeyWithValue("agent", "agent-7")))

		// The loop goes round again: land, update, commit.
		e.ok("", "land", "agent/7", "--onto", "main")
		e.write("wt7/c.txt", "c\n")
		e.ok("", "update", wt, "--onto", "main")
		third := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "third").(map[string]any)["id"].(string)
		Expect(refID("agent/7")).To(Equal(third))
	})

	It("moves the branch to a change list committed on a --parent that holds it", func() {
		other := e.commit("put other.txt = \"x\\n\"\n", "--advance", "main", "-m", "other")
		id := e.commit("put c.txt = \"c\\n\"\n", "--parent", "main", "--advance", "agent/7", "-m", "on main")
		Expect(parentsOf(id)).To(Equal([]any{other}))
		Expect(refID("agent/7")).To(Equal(id))
		Expect(refID("main")).To(Equal(other))
	})

	It("commits a tree an update carried the branch's work into as a merge of the two, and moves the branch", func() {
		e.write("wt7/c.txt", "c\n")
		third := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "third").(map[string]any)["id"].(string)
		other := e.commit("put other.txt = \"x\\n\"\n", "--advance", "main", "-m", "other")
		e.ok("", "update", wt, "--onto", "main")
		e.write("wt7/d.txt", "d\n")
		id := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "merge").(map[string]any)["id"].(string)
		Expect(parentsOf(id)).To(Equal([]any{other, third}))
		Expect(refID("agent/7")).To(Equal(id))
		for p, want := range map[string]string{"c.txt": "c\n", "d.txt": "d\n", "other.txt": "x\n"} {
			Expect(e.run("", "cat", "agent/7:"+p).Stdout).To(Equal(want), p)
		}
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
		e.ok("", "land", "agent/7", "--onto", "main")
		Expect(refID("main")).To(Equal(id), "the land fast-forwards main")
	})

	It("commits a conflict the agent resolved by taking main's side as a merge that drops its own change", func() {
		e.write("wt7/a.txt", "a\nmine\n")
		mine := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "mine").(map[string]any)["id"].(string)
		theirs := e.commit("put a.txt = \"a\\ntheirs\\n\"\n", "--advance", "main", "-m", "theirs")
		up := e.run("", "update", wt, "--onto", "main", "--json").Err()
		Expect(up["conflicts"]).NotTo(BeEmpty())
		e.write("wt7/a.txt", "a\ntheirs\n")
		e.ok("", "resolve", wt, "--all")
		id := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "take main's side").(map[string]any)["id"].(string)
		Expect(parentsOf(id)).To(Equal([]any{theirs, mine}))
		Expect(e.run("", "cat", "agent/7:a.txt").Stdout).To(Equal("a\ntheirs\n"))
		e.ok("", "land", "agent/7", "--onto", "main")
		Expect(refID("main")).To(Equal(id))
	})

	It("refuses a change list for a branch holding work its parent lacks, with a hint, and writes nothing", func() {
		e.write("wt7/c.txt", "c\n")
		third := e.ok("", "commit", "--dir", wt, "--advance", "agent/7", "-m", "third").(map[string]any)["id"].(string)
		e.commit("put other.txt = \"x\\n\"\n", "--advance", "main", "-m", "other")
		before := e.journalState()
		er := e.run("put d.txt = \"d\\n\"\n", "commit", "-F", "-", "--parent", "main", "--advance", "agent/7", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("ref", "agent/7"),
			HaveKeyWithValue("current", third)))
		Expect(er["hint"]).To(ContainSubstring("land agent/7"))
		Expect(e.journalState()).To(Equal(before))
	})

	It("refuses a parent behind the ref, with a hint to commit on it, and keeps the tree's changes", func() {
		start := parentsOf("main")[0].(string)
		before := e.journalState()
		er := e.run("put z.txt = \"z\\n\"\n", "commit", "-F", "-", "--parent", start, "--advance", "main", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("current", first)))
		Expect(er["hint"]).To(ContainSubstring("--parent main"))
		Expect(e.journalState()).To(Equal(before))

		z := e.commit("put z.txt = \"z\\n\"\n", "--advance", "main", "-m", "z")
		e.write("wt7/e.txt", "e\n")
		er = e.run("", "commit", "--dir", wt, "--advance", "main", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("current", z)))
		Expect(er["hint"]).To(ContainSubstring("swarmops update " + wt + " --onto main"))
		Expect(e.run("", "status", wt).Stdout).To(Equal("A e.txt\n"))
	})

	It("loses cleanly to a mover between the read and the move: E_CONFLICT with the winner, nothing lost", func() {
		other := e.commit("put other.txt = \"x\\n\"\n", "--advance", "main", "-m", "other")
		s, err := core.Open(e.store, core.Options{LockTimeout: 10 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		sn, err := s.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		ids := map[string]core.ID{}
		for _, name := range []string{"main", "agent/7"} {
			ids[name], err = sn.Ref(name)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(ids["main"].String()).To(Equal(other))

		// Another agent moves the branch after this commit read it.
		racer, err := s.Commit(core.CommitRequest{Parents: []core.ID{ids["agent/7"]}, Advance: "agent/7",
			Changes: []core.Change{{Path: "racer.txt", Data: []byte("r\n")}}})
		Expect(err).NotTo(HaveOccurred())

		a := &app{stdout: GinkgoWriter, stderr: GinkgoWriter, getenv: inProcessEnv(e.store, true)}
		c := commitFlags{advance: "agent/7", agent: "agent-7", msg: "second"}
		_, err = a.commitRequest(s, sn, c, core.CommitRequest{Parents: []core.ID{ids["main"]}, Advance: "agent/7",
			Agent: c.agent, Message: c.msg, Changes: []core.Change{{Path: "b.txt", Data: []byte("b\n")}}})
		Expect(err).To(HaveOccurred())
		ce := classify(err)
		Expect(ce.kind).To(Equal(kindConflict))
		Expect(ce.extra).To(SatisfyAll(HaveKeyWithValue("ref", "agent/7"), HaveKeyWithValue("current", racer.String())))

		// The racer's move stands, main is untouched, and the loser's
		// changeset is stored under the id its message names.
		Expect(refID("agent/7")).To(Equal(racer.String()))
		Expect(refID("main")).To(Equal(other))
		m := regexp.MustCompile(`^commit ([0-9a-f]{12}): advance ref "agent/7"`).FindStringSubmatch(ce.message())
		Expect(m).NotTo(BeNil(), ce.message())
		Expect(e.run("", "cat", m[1]+":b.txt").Stdout).To(Equal("b\n"))
		Expect(parentsOf(m[1])).To(Equal([]any{other}))
	})
})
