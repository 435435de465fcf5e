// sse_go.go PORT - a streaming chat-completions server on Go's net/http:
// CHUNKS chunks (default 8), each flushed, then "data: [DONE]". Prints
// "listening PORT".
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	chunks, _ := strconv.Atoi(os.Getenv("CHUNKS"))
	if chunks <= 0 {
		chunks = 8
	}
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 0; i <= chunks; i++ {
			delta, finish := fmt.Sprintf(`{"content":"tok%d "}`, i), "null"
			if i == chunks {
				delta, finish = "{}", `"stop"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\","+
				"\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
			f.Flush()
			time.Sleep(2 * time.Millisecond)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	fmt.Printf("listening %s\n", os.Args[1])
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
