//go:build tools

package tools

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/mattn/go-isatty"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "github.com/onsi/gomega"
	_ "github.com/onsi/gomega/gexec"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/afero"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "gopkg.in/yaml.v3"
	_ "lukechampine.com/blake3"
	_ "pgregory.net/rapid"
)
