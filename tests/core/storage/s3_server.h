#pragma once
// The S3 server of this test run (scripts/s3-test-server.sh, started once per ctest run as the
// fixture `s3_server`): its endpoint and keys, read from the env.sh the script writes.

#include "core/storage/s3.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QtGlobal>
#include <fstream>
#include <map>
#include <string>

namespace s3test {

inline std::map<std::string, std::string> server_env()
{
    std::map<std::string, std::string> out;
    const QByteArray file = qgetenv("SHARDSCOPE_S3_ENV");
    std::ifstream in(file.toStdString());
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("export "))
            continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos)
            out[line.substr(7, eq - 7)] = line.substr(eq + 1);
    }
    return out;
}

inline shardscope::storage::S3Config server_config()
{
    const auto env = server_env();
    const auto get = [&](const char* k) { return env.contains(k) ? env.at(k) : std::string(); };
    return {
        .endpoint = get("SHARDSCOPE_S3_ENDPOINT"),
        .region = get("AWS_DEFAULT_REGION"),
        .credentials = {.access_key_id = get("AWS_ACCESS_KEY_ID"), .secret_access_key = get("AWS_SECRET_ACCESS_KEY")}};
}

// A bucket name of its own for each test program and run, so that suites never see each other's
// objects on the shared server.
inline std::string fresh_bucket(const std::string& stem)
{
    return stem + "-" + std::to_string(QCoreApplication::applicationPid()) + "-" +
        std::to_string(QDateTime::currentMSecsSinceEpoch() % 100000000);
}

} // namespace s3test
