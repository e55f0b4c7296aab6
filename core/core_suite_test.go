package core_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestCoreSpecs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "core store specs")
}
