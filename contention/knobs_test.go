package contention

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Knobs", func() {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}

	It("reads every knob from the environment", func() {
		k, err := knobsFrom(env(EnvWriters, "8", EnvPerWriter, "3", EnvPauseUS, "2000",
			EnvLockTimeout, "250ms", EnvSlowPerWriter, "50", EnvLinTimeout, "5s", EnvCLIPerWriter, "4", EnvQueueAgents, "5"))
		Expect(err).NotTo(HaveOccurred())
		Expect(k).To(Equal(Knobs{Writers: 8, PerWriter: 3, CLIPerWriter: 4, SlowPerWriter: 50, QueueAgents: 5,
			Pause: 2 * time.Millisecond, LockTimeout: 250 * time.Millisecond, LinTimeout: 5 * time.Second}))
	})

	It("keeps the defaults when nothing is set", func() {
		k, err := knobsFrom(env())
		Expect(err).NotTo(HaveOccurred())
		Expect(k).To(Equal(DefaultKnobs()))
	})

	DescribeTable("refuses a malformed value and names the variable",
		func(name, value string) {
			_, err := knobsFrom(env(name, value))
			Expect(err).To(HaveOccurred())
			Expect(errors.Is(err, ErrKnob)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring(name))
		},
		Entry("writers not a number", EnvWriters, "32x"),
		Entry("writers zero", EnvWriters, "0"),
		Entry("per-writer empty", EnvPerWriter, ""),
		Entry("CLI per-writer a float", EnvCLIPerWriter, "2.5"),
		Entry("pause negative", EnvPauseUS, "-5"),
		Entry("pause with a unit", EnvPauseUS, "2ms"),
		Entry("lock timeout without unit", EnvLockTimeout, "10"),
		Entry("lock timeout zero", EnvLockTimeout, "0s"),
		Entry("slow per-writer negative", EnvSlowPerWriter, "-1"),
		Entry("checker timeout garbage", EnvLinTimeout, "soon"),
		Entry("queue agents too few to fail two", EnvQueueAgents, "2"),
	)
})
