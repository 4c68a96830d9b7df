// modelfile_check.go — renders the TEMPLATE of an Ollama Modelfile ptrain wrote with Go's
// text/template, the engine Ollama runs templates with, as Ollama builds a generation prompt:
// .System (the Modelfile's SYSTEM unless one is given), .Prompt, and the text cut where
// .Response would start. Prints the prompt; exit 1 when the Modelfile or its template does not
// parse. Usage: go run modelfile_check.go MODELFILE PROMPT [SYSTEM]
package main

import (
	"fmt"
	"os"
	"strings"
	"text/template"
)

// block returns the text of `KEY """..."""` (or `KEY "..."` / `KEY word`) in the Modelfile.
func block(modelfile, key string) (string, bool) {
	at := strings.Index(modelfile, "\n"+key+" ")
	if at < 0 {
		return "", false
	}
	rest := modelfile[at+len(key)+2:]
	if strings.HasPrefix(rest, `"""`) {
		end := strings.Index(rest[3:], `"""`)
		if end < 0 {
			return "", false
		}
		return rest[3 : 3+end], true
	}
	line := strings.SplitN(rest, "\n", 2)[0]
	return strings.Trim(line, `"`), true
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: modelfile_check MODELFILE PROMPT [SYSTEM]")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	text := "\n" + string(data)
	tmpl, ok := block(text, "TEMPLATE")
	if !ok {
		fmt.Fprintln(os.Stderr, "no TEMPLATE in", os.Args[1])
		os.Exit(1)
	}
	system, _ := block(text, "SYSTEM")
	if len(os.Args) > 3 {
		system = os.Args[3]
	}
	t, err := template.New("modelfile").Parse(tmpl)
	if err != nil {
		fmt.Fprintln(os.Stderr, "template does not parse:", err)
		os.Exit(1)
	}
	const marker = "\x00RESPONSE\x00"
	var out strings.Builder
	vars := map[string]any{"System": system, "Prompt": os.Args[2], "Response": marker}
	if err := t.Execute(&out, vars); err != nil {
		fmt.Fprintln(os.Stderr, "template does not run:", err)
		os.Exit(1)
	}
	prompt := out.String()
	if i := strings.Index(prompt, marker); i >= 0 {
		prompt = prompt[:i]
	}
	fmt.Print(prompt)
}
