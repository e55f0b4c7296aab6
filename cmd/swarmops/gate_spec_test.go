package main

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("land --check", func() {
	var e *env
	const check = "if test -e BAD; then echo marker BAD found; exit 3; fi"
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put a.txt = \"a\\n\"\n", "--advance", "main", "--create", "-m", "first")
	})

	It("lands a change the check passes on, and ejects one it fails with E_CHECK_FAILED, its exit status and output", func() {
		e.ok("", "ref", "protect", "main")
		good := e.commit("put g.txt = \"g\\n\"\n", "--parent", "main", "-m", "good")
		bad := e.commit("put BAD = \"b\\n\"\n", "--parent", "main", "-m", "bad")
		Expect(e.ok("", "land", good, "--onto", "main", "--check", check)).To(SatisfyAll(
			HaveKeyWithValue("changeset", good), HaveKeyWithValue("head", good),
			HaveKeyWithValue("batch", 1.0), HaveKeyWithValue("checks", 1.0), HaveKeyWithValue("noop", false)))
		before := e.journalState()
		er := e.run("", "land", bad, "--onto", "main", "--check", check, "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CHECK_FAILED"), HaveKeyWithValue("exit_status", 3.0),
			HaveKeyWithValue("timed_out", false), HaveKeyWithValue("output", "marker BAD found\n"),
			HaveKeyWithValue("change", bad), HaveKeyWithValue("onto", "main")))
		Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", good), "main stays where the check passed")
		Expect(e.journalState()).NotTo(Equal(before), "the queue recorded the ejection")
		Expect(e.ok("", "ref", "list", "queue")).To(BeEmpty(), "no queue ref is left once the land has answered")
		Expect(e.ok("", "land", good, "--onto", "main", "--check", check)).To(SatisfyAll(
			HaveKeyWithValue("noop", true), HaveKeyWithValue("checks", 0.0)))
	})

	It("kills a check past --check-timeout and ejects the change", func() {
		c := e.commit("put s.txt = \"s\\n\"\n", "--parent", "main", "-m", "slow")
		er := e.run("", "land", c, "--onto", "main", "--check", "echo started; sleep 30", "--check-timeout", "300ms", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CHECK_FAILED"), HaveKeyWithValue("timed_out", true),
			HaveKeyWithValue("output", "started\n")))
	})

	DescribeTable("refuses a malformed gate with E_USAGE before it queues anything",
		func(args ...string) {
			c := e.commit("put s.txt = \"s\\n\"\n", "--parent", "main", "-m", "c")
			before := e.journalState()
			er := e.run("", append([]string{"land", c, "--onto", "main", "--json"}, args...)...).Err()
			Expect(er).To(HaveKeyWithValue("code", "E_USAGE"))
			Expect(e.journalState()).To(Equal(before))
		},
		Entry("a timeout that is no duration", "--check", "true", "--check-timeout", "soon"),
		Entry("a negative timeout", "--check", "true", "--check-timeout", "-1s"),
		Entry("a timeout without a check", "--check-timeout", "1s"),
		Entry("an empty check", "--check", ""),
	)
})
