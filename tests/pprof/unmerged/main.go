// SPDX-License-Identifier: Apache-2.0
// Command unmerged reads pprof files as they are, without the merge that
// `go tool pprof -raw` applies (which drops all-zero samples and sums
// samples with the same key), and reports what a delta must never emit:
// a sample whose values are all zero, or two samples with the same key
// (location addresses and labels). Prints "FILE: N samples" per file;
// exits 1 after printing every violation.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

func key(s *profile.Sample) string {
	var b strings.Builder
	for _, l := range s.Location {
		fmt.Fprintf(&b, "%x,", l.Address)
	}
	var ls []string
	for k, v := range s.Label {
		ls = append(ls, fmt.Sprintf("%s=%q", k, v))
	}
	for k, v := range s.NumLabel {
		ls = append(ls, fmt.Sprintf("%s=%v%v", k, v, s.NumUnit[k]))
	}
	sort.Strings(ls)
	b.WriteString(strings.Join(ls, ";"))
	return b.String()
}

func main() {
	bad := false
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			fmt.Printf("%s: %v\n", path, err)
			os.Exit(2)
		}
		seen := map[string]int{}
		for i, s := range p.Sample {
			zero := true
			for _, v := range s.Value {
				zero = zero && v == 0
			}
			if zero {
				fmt.Printf("%s: sample %d is all zero\n", path, i)
				bad = true
			}
			k := key(s)
			if j, ok := seen[k]; ok {
				fmt.Printf("%s: samples %d and %d have the same key %s\n", path, j, i, k)
				bad = true
			}
			seen[k] = i
		}
		fmt.Printf("%s: %d samples\n", path, len(p.Sample))
	}
	if bad {
		os.Exit(1)
	}
}
