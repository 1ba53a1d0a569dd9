#!/bin/sh
# Builds the Kotlin client with kotlinc (no Gradle: none fits JDK 17 here) and runs its JUnit 5
# tests with the console launcher. Prints the compilers' errors and the launcher's summary;
# exits non-zero on any failure.
#
#   ./build.sh          compile src/main into build/bird-realtime.jar, compile and run the tests
#   ./build.sh jar      only the jar
#   ./build.sh bench [--events N] [--runs R] [--warmups W] [--only bare|client|direct|alone|one-thread]
#                       the jar, then bench/ (room events/s through room.on against OkHttp's
#                       listener on a loopback firehose), run; prints a markdown table (one
#                       column's runs with --only, and for the fake transport the reader's CPU
#                       and bytes allocated per event; BENCH_JAVA_OPTS, e.g. a flight recording,
#                       go to its JVM)
#   ./build.sh peer     the jar, then peer/ (the interop tests' room peer); prints the java
#                       command line that runs it (then PORT APP_KEY AUTH_URL USER ROOM)
#
# Environment: KOTLIN_BUILD_DIR (default build) is where everything is built (a test that builds
# the peer while another builds the tests gives each its own); JAVA_LIBS (default /usr/share/java) holds okhttp.jar, okio.jar, kotlin-stdlib.jar
# and junit-platform-console-standalone.jar; REALTIME_SERVER, ROOM_BACKEND and REALTIME_CLI (the
# Swift CLI, `realtime`) name the binaries of the end-to-end tests (skipped without them unless
# CI=true, then failed); KOTLINC_TIMEOUT bounds each compilation, TEST_TIMEOUT the test run and
# BENCH_TIMEOUT the benchmark, in seconds (900, 300, 600).
set -eu

cd "$(dirname "$0")"
LIBS=${JAVA_LIBS:-/usr/share/java}
BUILD=${KOTLIN_BUILD_DIR:-build}

need() {
    for jar in "$@"; do
        if [ ! -f "$LIBS/$jar" ]; then
            echo "build.sh: $LIBS/$jar is missing (apt-get install kotlin libokhttp-java libokio-java junit5)" >&2
            exit 2
        fi
    done
}

need okhttp.jar okio.jar kotlin-stdlib.jar
MAIN_CP="$LIBS/okhttp.jar:$LIBS/okio.jar:$LIBS/kotlin-stdlib.jar"

# kotlinc 1.3 on JDK 17 warns that -Xverify:none is deprecated on every run: not ours to fix.
quiet() { grep -v -e 'Options -Xverify:none and -noverify were deprecated' || true; }

compile() {
    # $1: output directory, $2: module name, rest: kotlinc arguments. Fails when kotlinc fails.
    out=$1
    module=$2
    shift 2
    rm -rf "$out"
    mkdir -p "$out"
    status=0
    timeout "${KOTLINC_TIMEOUT:-900}" kotlinc -nowarn -jvm-target 1.8 -module-name "$module" -d "$out" "$@" 2>"$BUILD/kotlinc.log" || status=$?
    quiet <"$BUILD/kotlinc.log" >&2
    if [ "$status" -ne 0 ]; then
        echo "build.sh: kotlinc failed ($status)" >&2
        exit "$status"
    fi
}

mkdir -p "$BUILD"
compile "$BUILD/main" bird-realtime -cp "$MAIN_CP" $(find src/main/kotlin -name '*.kt' | sort)
rm -f "$BUILD/bird-realtime.jar"
(cd "$BUILD/main" && jar cf ../bird-realtime.jar .)
echo "built $BUILD/bird-realtime.jar"
[ "${1:-}" = "jar" ] && exit 0

if [ "${1:-}" = "peer" ]; then
    PEER_CP="$BUILD/bird-realtime.jar:$MAIN_CP"
    compile "$BUILD/peer" bird-realtime-peer -cp "$PEER_CP" $(find peer -name '*.kt' | sort)
    echo "java -cp $(cd "$BUILD" && pwd)/peer:$(cd "$BUILD" && pwd)/bird-realtime.jar:$MAIN_CP com.bird.realtime.peer.RoomPeerKt"
    exit 0
fi

if [ "${1:-}" = "bench" ]; then
    shift
    BENCH_CP="$BUILD/bird-realtime.jar:$MAIN_CP"
    compile "$BUILD/bench" bird-realtime-bench -cp "$BENCH_CP" $(find bench -name '*.kt' | sort)
    echo "built $BUILD/bench"
    # Bounded: each run waits at most 60 s for its events; the whole at most BENCH_TIMEOUT (600 s).
    exec timeout "${BENCH_TIMEOUT:-600}" java ${BENCH_JAVA_OPTS:-} -cp "$BUILD/bench:$BENCH_CP" com.bird.realtime.bench.RoomEventsBenchKt "$@"
fi

need junit-platform-console-standalone.jar
TEST_CP="$BUILD/main:$MAIN_CP:$LIBS/junit-platform-console-standalone.jar"
compile "$BUILD/test" bird-realtime -cp "$TEST_CP" -Xfriend-paths="$PWD/$BUILD/main" $(find src/test/kotlin -name '*.kt' | sort)

# The launcher's tree is long: its failures and summary are what matter.
status=0
timeout "${TEST_TIMEOUT:-300}" java -jar "$LIBS/junit-platform-console-standalone.jar" \
    --class-path "$BUILD/test:$TEST_CP" --scan-class-path "$BUILD/test" \
    --disable-banner --details=summary --details-theme=ascii >"$BUILD/tests.log" 2>&1 || status=$?
if grep -q '^Test run finished' "$BUILD/tests.log"; then
    sed -n '/^Failures (/,/^Test run finished/{/^Test run finished/!p;}' "$BUILD/tests.log" | head -150
    sed -n '/^Test run finished/,$p' "$BUILD/tests.log" | grep -E 'Test run finished|tests (found|skipped|successful|failed|aborted)'
else
    tail -40 "$BUILD/tests.log"
fi
if [ "$status" -ne 0 ]; then
    echo "build.sh: tests failed ($status; the whole log is $BUILD/tests.log)" >&2
    exit "$status"
fi
