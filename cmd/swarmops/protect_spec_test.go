package main

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("protected refs", func() {
	var e *env
	var m1 string
	BeforeEach(func() {
		e = newStoreEnv()
		m1 = e.commit("put a.txt = \"a\\n\"\n", "--advance", "main", "-m", "first")
		e.commit("put b.txt = \"b\\n\"\n", "--advance", "main", "-m", "second")
	})

	It("refuses every move of a protected ref but land, with E_PROTECTED and a hint to land, and writes nothing", func() {
		Expect(e.ok("", "ref", "protect", "main")).To(Equal(map[string]any{"pattern": "main", "protected": true}))
		before := e.journalState()
		for _, args := range [][]string{
			{"ref", "set", "main", m1, "--expect", "main"},
			{"ref", "delete", "main"},
			{"undo", "2"},
		} {
			er := e.run("", append(args, "--json")...).Err()
			Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_PROTECTED"), HaveKeyWithValue("ref", "main"),
				HaveKeyWithValue("pattern", "main"), HaveKeyWithValue("hint", ContainSubstring("swarmops land"))), "%v", args)
		}
		r := e.run("put c.txt = \"c\\n\"\n", "commit", "-F", "-", "--parent", "main", "--advance", "main", "--json")
		Expect(r.Err()).To(HaveKeyWithValue("code", "E_PROTECTED"))
		Expect(e.journalState()).To(Equal(before))
		side := e.commit("put s.txt = \"s\\n\"\n", "--parent", "main", "-m", "side")
		Expect(e.ok("", "land", side, "--onto", "main")).To(HaveKeyWithValue("changeset", side))
	})

	It("covers a prefix's refs, lets a missing one be created, and lists, filters and clears patterns", func() {
		e.ok("", "ref", "protect", "release/")
		e.ok("", "ref", "protect", "main")
		e.ok("", "ref", "create", "release/1", "main")
		e.ok("", "ref", "create", "releases", "main")
		e.ok("", "ref", "set", "releases", m1, "--expect", "main")
		Expect(e.run("", "ref", "set", "release/1", m1, "--expect", "main", "--json").Err()).To(HaveKeyWithValue("pattern", "release/"))
		Expect(e.ok("", "ref", "list", "rel")).To(HaveLen(2))
		ps := e.ok("", "ref", "list", "--protected").([]any)
		Expect(ps).To(HaveLen(2))
		Expect(ps[0]).To(HaveKeyWithValue("pattern", "main"))
		Expect(ps[1]).To(HaveKeyWithValue("pattern", "release/"))
		Expect(e.ok("", "ref", "list", "--protected", "rel")).To(HaveLen(1))
		Expect(e.run("", "ref", "unprotect", "mian", "--json").Err()).To(SatisfyAll(
			HaveKeyWithValue("code", "E_NOT_FOUND"), HaveKeyWithValue("hint", ContainSubstring("main"))))
		e.ok("", "ref", "unprotect", "release/")
		e.ok("", "ref", "set", "release/1", m1, "--expect", "main")
		Expect(e.ok("", "ref", "list", "--protected")).To(HaveLen(1))
		Expect(e.run("", "ref", "protect", "bad..name", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
	})
})
