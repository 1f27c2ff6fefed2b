# Turns a binary file into a C array: cmake -DIN=f -DOUT=f.c -DSYM=name -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} */\n#include <stddef.h>\nconst unsigned char ${SYM}[] = {\n${body}\n};\nconst size_t ${SYM}_size = ${size};\n")
