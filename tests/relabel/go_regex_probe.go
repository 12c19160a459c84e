// SPDX-License-Identifier: Apache-2.0
// go_regex_probe: the Go side of regexdiff.py. Compiles each regex as
// Prometheus does ("^(?s:" + re + ")$") with Go's regexp and prints the
// error or the leftmost-first submatch offsets, in regex_probe's format.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<22)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.SplitN(in.Text(), " ", 2)
		pat, _ := hex.DecodeString(f[0])
		subj := []byte{}
		if len(f) > 1 {
			subj, _ = hex.DecodeString(f[1])
		}
		re, err := regexp.Compile("^(?s:" + string(pat) + ")$")
		if err != nil {
			fmt.Fprintf(out, "ERR %s\n", hex.EncodeToString([]byte(err.Error())))
			continue
		}
		m := re.FindSubmatchIndex(subj)
		if m == nil {
			fmt.Fprintln(out, "NOMATCH")
			continue
		}
		fmt.Fprint(out, "MATCH")
		for i := 0; i < len(m); i += 2 {
			fmt.Fprintf(out, " %d,%d", m[i], m[i+1])
		}
		fmt.Fprintln(out)
	}
}
