module poolcmp

go 1.26.8

require github.com/valyala/bytebufferpool v1.0.0
