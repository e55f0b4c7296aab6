package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// An agent's work tree falls behind while other agents land on main;
// update brings it forward with its own changes kept.
var _ = Describe("update and resolve", func() {
	const registry = "1\n2\n3\n4\n5\n6\n7\n8\n"
	var (
		e  *env
		wt string
	)
	read := func(p string) string {
		GinkgoHelper()
		b, err := os.ReadFile(filepath.Join(wt, p))
		Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
	write := func(p, data string) {
		GinkgoHelper()
		Expect(os.WriteFile(filepath.Join(wt, p), []byte(data), 0o644)).To(Succeed())
	}
	// other lands another agent's change on main, as an agent would: a
	// commit on its own ref, landed.
	other := func(agent, list string) {
		GinkgoHelper()
		e.commit(list, "--parent", "main", "--advance", "agent/"+agent, "--create", "--agent", agent)
		e.ok("", "land", "agent/"+agent, "--onto", "main")
	}
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put reg.txt = \""+escape(registry)+"\"\nput old.txt = \"old\\n\"\n", "--advance", "main", "-m", "base")
		wt = filepath.Join(e.root, "wt")
		e.ok("", "checkout", "main", wt)
	})

	It("brings other agents' landed work in, keeps ours, and a commit and land give both", func() {
		write("reg.txt", "ONE\n2\n3\n4\n5\n6\n7\n8\n")
		write("mine.txt", "mine\n")
		other("b", "put reg.txt = \"1\\n2\\n3\\n4\\n5\\n6\\n7\\nEIGHT\\n\"\nput theirs.txt = \"t\\n\"\ndelete old.txt\n")
		main := e.ok("", "ref", "get", "main").(map[string]any)["id"].(string)

		// A stale tree is refused with a hint naming update.
		er := e.run("", "commit", "--dir", wt, "--parent", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_STALE"))
		Expect(er["hint"]).To(ContainSubstring("swarmops update"))

		// The tree follows main (it was checked out by that name).
		up := e.ok("", "update", wt).(map[string]any)
		Expect(up["changeset"]).To(Equal(main))
		Expect(up["conflicts"]).To(BeEmpty())
		Expect(up["merged"]).To(ConsistOf("reg.txt"))
		Expect(read("reg.txt")).To(Equal("ONE\n2\n3\n4\n5\n6\n7\nEIGHT\n"))
		Expect(read("theirs.txt")).To(Equal("t\n"))
		Expect(filepath.Join(wt, "old.txt")).NotTo(BeAnExistingFile())
		Expect(e.run("", "status", wt).Stdout).To(Equal("A mine.txt\nM reg.txt\n"))

		c := e.ok("", "commit", "--dir", wt, "--advance", "agent/a", "--create", "-m", "ours").(map[string]any)
		Expect(c["parents"]).To(Equal([]any{main}), "after update the parent is the revision updated onto")
		e.ok("", "land", "agent/a", "--onto", "main")
		Expect(e.run("", "cat", "main:reg.txt").Stdout).To(Equal("ONE\n2\n3\n4\n5\n6\n7\nEIGHT\n"))
		Expect(e.run("", "cat", "main:theirs.txt").Stdout).To(Equal("t\n"))
		Expect(e.run("", "cat", "main:mine.txt").Stdout).To(Equal("mine\n"))
		Expect(e.run("", "cat", "main:old.txt", "--json").Err()["code"]).To(Equal("E_NOT_FOUND"))
	})

	It("writes diff3 markers for what cannot merge, lists it, refuses the commit, and lands once resolved", func() {
		base := e.ok("", "ref", "get", "main").(map[string]any)["id"].(string)
		write("reg.txt", "1\n2\n3\nours\n5\n6\n7\n8\n")
		other("b", "put reg.txt = \"1\\n2\\n3\\ntheirs\\n5\\n6\\n7\\n8\\n\"\n")

		r := e.run("", "update", wt, "--json")
		Expect(r.Exit).To(Equal(18), "an update that leaves conflicts exits E_UNRESOLVED: %s", r.Stdout)
		expectGolden("update-conflict", r, e.root)
		up := r.Err()
		Expect(up).To(SatisfyAll(HaveKeyWithValue("code", "E_UNRESOLVED"), HaveKeyWithValue("paths", ConsistOf("reg.txt")),
			HaveKeyWithValue("hint", ContainSubstring("swarmops resolve")), HaveKey("changeset"), HaveKey("written")))
		Expect(e.ok("", "status", wt).(map[string]any)["ref"]).To(Equal("main"), "the tree moved onto main all the same")
		cs := up["conflicts"].([]any)
		Expect(cs).To(HaveLen(1))
		c := cs[0].(map[string]any)
		Expect(c["path"]).To(Equal("reg.txt"))
		Expect(c).To(HaveKey("base"))
		Expect(c).To(HaveKey("ours"))
		Expect(c).To(HaveKey("theirs"))
		Expect(read("reg.txt")).To(Equal("1\n2\n3\n<<<<<<< work tree\nours\n||||||| base " + base[:12] +
			"\n4\n=======\ntheirs\n>>>>>>> main\n5\n6\n7\n8\n"))

		expectGolden("status-conflict", e.run("", "status", wt, "--json"), e.root)
		st := e.ok("", "status", wt).(map[string]any)
		Expect(st["conflicts"]).To(HaveLen(1))
		Expect(e.run("", "status", wt).Stdout).To(Equal("C reg.txt\n"))

		before := e.journalState()
		r = e.run("", "commit", "--dir", wt, "--advance", "agent/a", "--create", "--json")
		expectGolden("error-unresolved", r, e.root)
		er := r.Err()
		Expect(er["code"]).To(Equal("E_UNRESOLVED"))
		Expect(er["paths"]).To(ConsistOf("reg.txt"))
		Expect(er["hint"]).To(ContainSubstring("swarmops resolve"))
		Expect(e.journalState()).To(Equal(before), "a refused commit writes nothing")
		Expect(e.run("", "update", wt, "--json").Err()["code"]).To(Equal("E_UNRESOLVED"))

		er = e.run("", "resolve", wt, "reg.txt", "--json").Err()
		Expect(er["code"]).To(Equal("E_UNRESOLVED"), "markers are still in the file")
		Expect(e.run("", "resolve", wt, "old.txt", "--json").Err()["code"]).To(Equal("E_USAGE"))

		write("reg.txt", "1\n2\n3\nours and theirs\n5\n6\n7\n8\n")
		r = e.run("", "resolve", wt, "reg.txt", "--json")
		Expect(r.Exit).To(Equal(0), r.Stdout)
		expectGolden("resolve", r, e.root)
		Expect(r.Data().(map[string]any)["resolved"]).To(ConsistOf("reg.txt"))
		Expect(e.run("", "status", wt).Stdout).To(Equal("M reg.txt\n"))
		e.ok("", "commit", "--dir", wt, "--advance", "agent/a", "--create", "-m", "resolved")
		e.ok("", "land", "agent/a", "--onto", "main")
		Expect(e.run("", "cat", "main:reg.txt").Stdout).To(Equal("1\n2\n3\nours and theirs\n5\n6\n7\n8\n"))
	})

	It("resolves paths relative to the current directory inside the tree", func() {
		Expect(os.MkdirAll(filepath.Join(wt, "sub"), 0o755)).To(Succeed())
		write("sub/s.txt", "ours\n")
		other("b", "put sub/s.txt = \"theirs\\n\"\n")
		up := e.run("", "update", wt, "--json").Err()
		Expect(up["conflicts"]).To(HaveLen(1))
		write("sub/s.txt", "both\n")
		c := e.cmd("", "resolve", "s.txt", "--json")
		c.Dir = filepath.Join(wt, "sub")
		out, err := c.Output()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(ContainSubstring(`"resolved":["sub/s.txt"]`))
		Expect(e.ok("", "status", wt).(map[string]any)["conflicts"]).To(BeEmpty())
		er := e.run("", "resolve", wt, "sub/s.txt", "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring("has no conflict"))
	})

	It("needs --onto for a tree checked out by id, and follows the ref --onto names", func() {
		id := e.ok("", "ref", "get", "main").(map[string]any)["id"].(string)
		byID := filepath.Join(e.root, "byid")
		e.ok("", "checkout", id, byID)
		er := e.run("", "update", byID, "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring("--onto"))
		other("b", "put new.txt = \"n\\n\"\n")
		e.ok("", "update", byID, "--onto", "main")
		Expect(e.ok("", "status", byID).(map[string]any)["ref"]).To(Equal("main"))
		other("c", "put newer.txt = \"n\\n\"\n")
		e.ok("", "update", byID)
		Expect(filepath.Join(byID, "newer.txt")).To(BeARegularFile())
	})
})

// escape quotes text for a change list's "..." form.
func escape(s string) string {
	out := ""
	for _, r := range s {
		switch r {
		case '\n':
			out += `\n`
		case '"':
			out += `\"`
		case '\\':
			out += `\\`
		default:
			out += string(r)
		}
	}
	return out
}
