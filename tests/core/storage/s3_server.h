#pragma once
// The S3 server of this test run (scripts/s3-test-server.sh, started once per ctest run as the
// fixture `s3_server`): its endpoint and keys, read from the env.sh the script writes.

#include "core/storage/s3.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
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

// scripts/s3-fault-proxy.py between a client and the server, for as long as the object lives.
// endpoint() is empty when the proxy did not come up within 10 s.
class FaultProxy {
public:
    explicit FaultProxy(const std::string& upstream)
    {
        const QString port_file = m_dir.filePath(QStringLiteral("port"));
        m_proxy.start(QStringLiteral("python3"),
                      {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/scripts/s3-fault-proxy.py"), QStringLiteral("--upstream"),
                       QString::fromStdString(upstream), QStringLiteral("--port"), QStringLiteral("0"),
                       QStringLiteral("--port-file"), port_file, QStringLiteral("--lifetime"), QStringLiteral("300")});
        QElapsedTimer waited;
        waited.start();
        while (m_proxy.state() != QProcess::NotRunning && QFile(port_file).size() == 0 && waited.elapsed() < 10000)
            QThread::msleep(20);
        QFile f(port_file);
        if (f.open(QIODevice::ReadOnly) && f.size() > 0)
            m_endpoint = "http://127.0.0.1:" + QString::fromUtf8(f.readAll()).trimmed().toStdString();
    }
    ~FaultProxy()
    {
        m_proxy.terminate();
        m_proxy.waitForFinished(5000);
    }
    const std::string& endpoint() const { return m_endpoint; }
    // Sets the fault ("mode=503&count=3", "mode=none", ...); false when the proxy refused it.
    bool fault(const char* query) const
    {
        QProcess curl;
        curl.start(QStringLiteral("curl"),
                   {QStringLiteral("-sf"), QStringLiteral("-X"), QStringLiteral("POST"),
                    QString::fromStdString(m_endpoint + "/__fault__?" + query)});
        return curl.waitForFinished(10000) && curl.exitStatus() == QProcess::NormalExit && curl.exitCode() == 0;
    }

private:
    QTemporaryDir m_dir;
    QProcess m_proxy;
    std::string m_endpoint;
};

} // namespace s3test
